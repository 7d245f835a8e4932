"""OLLM pipeline: the records, the services and the coordinator."""
