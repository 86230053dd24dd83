"""The views of the agents domain (docs/ARCHITECTURE.md "Packages")."""
