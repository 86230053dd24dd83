"""The services of the proposals domain (docs/ARCHITECTURE.md "Packages")."""
