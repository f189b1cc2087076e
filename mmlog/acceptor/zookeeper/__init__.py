"""Cluster mode: brokers coordinate through ZooKeeper (kazoo), with Kafka's paths."""
