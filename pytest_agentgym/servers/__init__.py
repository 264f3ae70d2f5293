"""Environment servers: lifecycle of external ones, and the plugin's embedded ones."""
