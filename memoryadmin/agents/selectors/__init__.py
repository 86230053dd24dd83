"""The selectors of the agents domain (docs/ARCHITECTURE.md "Packages")."""
