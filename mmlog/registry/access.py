"""Which ACL each registry request asks for: a subject `<topic>-key` or `<topic>-value` is the topic's, any
other subject and the global settings are the cluster's.

    read a subject (versions, lookup, compatibility)   Topic DESCRIBE      | Cluster DESCRIBE
    register a schema                                  Topic WRITE         | Cluster ALTER
    change a subject's config or mode                  Topic ALTER_CONFIGS | Cluster ALTER
    delete a subject or a version                      Topic DELETE        | Cluster ALTER
    change the global config or mode                   Cluster ALTER_CONFIGS
    schemas by id, schema types, the global config and mode read: any authenticated user
"""

from __future__ import annotations

from mmlog.security.acls import ALTER, ALTER_CONFIGS, CLUSTER, CLUSTER_NAME, DELETE, DESCRIBE, TOPIC, WRITE

READ, REGISTER, CONFIGURE, REMOVE = "read", "register", "configure", "remove"
_TOPIC_OPERATION = {READ: DESCRIBE, REGISTER: WRITE, CONFIGURE: ALTER_CONFIGS, REMOVE: DELETE}
_CLUSTER_OPERATION = {READ: DESCRIBE, REGISTER: ALTER, CONFIGURE: ALTER, REMOVE: ALTER}


def topic_of(subject: str) -> str | None:
    """The topic a subject names by Confluent's TopicNameStrategy (None: not a topic's subject)."""
    for suffix in ("-key", "-value"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return None


def for_subject(subject: str, action: str) -> tuple[int, int, str]:
    """(operation, resource type, resource name) an action on a subject is authorised as."""
    topic = topic_of(subject)
    if topic is not None:
        return _TOPIC_OPERATION[action], TOPIC, topic
    return _CLUSTER_OPERATION[action], CLUSTER, CLUSTER_NAME


def for_global() -> tuple[int, int, str]:
    return ALTER_CONFIGS, CLUSTER, CLUSTER_NAME
