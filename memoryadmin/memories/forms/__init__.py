"""The forms of the memories domain (docs/ARCHITECTURE.md "Packages")."""
