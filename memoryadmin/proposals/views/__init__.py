"""The views of the proposals domain (docs/ARCHITECTURE.md "Packages")."""
