"""The suite's HTML report: properties attach data with :mod:`reports.record`, the pytest plugin
collects it (per xdist worker, merged by the controller) and the generator renders it."""
