"""The services of the ops domain (docs/ARCHITECTURE.md "Packages")."""
