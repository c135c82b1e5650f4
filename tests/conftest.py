pytest_plugins = ["tests.fixtures.db", "tests.fixtures.sim"]
