"""The forms of the ops domain (docs/ARCHITECTURE.md "Packages")."""
