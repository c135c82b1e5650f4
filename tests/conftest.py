pytest_plugins = ["tests.fixtures.db", "tests.fixtures.processes", "tests.fixtures.sim"]
