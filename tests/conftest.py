pytest_plugins = ["tests.fixtures.db"]
