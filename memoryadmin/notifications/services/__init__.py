"""The services of the notifications domain (docs/ARCHITECTURE.md "Packages")."""
