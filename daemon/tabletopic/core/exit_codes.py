"""The daemon's exit codes, chosen so that a service manager restarts it only when that can help.

``deploy/systemd/tabletopic.service`` sets ``RestartPreventExitStatus=78``: a configuration
the brokers or the files refuse will not fix itself, while a broker or catalog that is down
may come back (69, restarted with a delay).
"""

OK = 0
FAILED = 1  # a connector failed while running, or the last commit did not finish
UNAVAILABLE = 69  # EX_UNAVAILABLE: Kafka, the catalog or the registry did not answer at start-up
CONFIG = 78  # EX_CONFIG: the configuration is wrong, or the brokers refuse its certificates or credentials
