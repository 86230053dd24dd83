"""The selectors of the proposals domain (docs/ARCHITECTURE.md "Packages")."""
