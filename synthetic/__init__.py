"""What specbench makes up, kept apart from what it measures: the stand-in server, synthetic models, seeded histories."""
