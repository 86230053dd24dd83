"""The views of the memories domain (docs/ARCHITECTURE.md "Packages")."""
