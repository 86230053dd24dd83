"""The forms of the agents domain (docs/ARCHITECTURE.md "Packages")."""
