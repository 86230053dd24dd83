"""The selectors of the memories domain (docs/ARCHITECTURE.md "Packages")."""
