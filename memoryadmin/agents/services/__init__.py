"""The services of the agents domain (docs/ARCHITECTURE.md "Packages")."""
