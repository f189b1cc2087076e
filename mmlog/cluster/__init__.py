"""The cluster's metadata and who changes it: topics, partitions, configs, brokers, ACLs and users, kept by
the embedded store (one broker, files in its data directory) or the ZooKeeper store (a cluster, Kafka's
paths); the controller that elects leaders, replica assignment and reassignment."""
