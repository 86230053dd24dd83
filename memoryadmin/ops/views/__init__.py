"""The views of the ops domain (docs/ARCHITECTURE.md "Packages")."""
