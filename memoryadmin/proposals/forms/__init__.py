"""The forms of the proposals domain (docs/ARCHITECTURE.md "Packages")."""
