"""The services of the memories domain (docs/ARCHITECTURE.md "Packages")."""
