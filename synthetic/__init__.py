"""What specbench makes up, apart from what it measures: the stand-in server, synthetic models, histories."""
