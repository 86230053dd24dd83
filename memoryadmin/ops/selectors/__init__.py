"""The selectors of the ops domain (docs/ARCHITECTURE.md "Packages")."""
