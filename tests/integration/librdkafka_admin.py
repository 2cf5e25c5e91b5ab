"""librdkafka's DeleteConsumerGroupOffsets, which confluent-kafka's Python AdminClient does
not expose (2.16.1 has no delete_consumer_group_offsets), called through ctypes on the
very librdkafka the confluent_kafka wheel ships: the request on the wire is the one every
librdkafka-based client sends."""
import ctypes
import glob
import os

import confluent_kafka


def _lib():
    libs = os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)), "confluent_kafka.libs")
    path = glob.glob(os.path.join(libs, "librdkafka*.so*"))[0]
    lib = ctypes.CDLL(path)
    P = ctypes.c_void_p
    for name, res, args in [
        ("rd_kafka_conf_new", P, []),
        ("rd_kafka_conf_set", ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]),
        ("rd_kafka_new", P, [ctypes.c_int, P, ctypes.c_char_p, ctypes.c_size_t]),
        ("rd_kafka_destroy", None, [P]),
        ("rd_kafka_queue_new", P, [P]),
        ("rd_kafka_queue_destroy", None, [P]),
        ("rd_kafka_queue_poll", P, [P, ctypes.c_int]),
        ("rd_kafka_event_destroy", None, [P]),
        ("rd_kafka_event_error", ctypes.c_int, [P]),
        ("rd_kafka_event_error_string", ctypes.c_char_p, [P]),
        ("rd_kafka_topic_partition_list_new", P, [ctypes.c_int]),
        ("rd_kafka_topic_partition_list_add", P, [P, ctypes.c_char_p, ctypes.c_int32]),
        ("rd_kafka_topic_partition_list_destroy", None, [P]),
        ("rd_kafka_DeleteConsumerGroupOffsets_new", P, [ctypes.c_char_p, P]),
        ("rd_kafka_DeleteConsumerGroupOffsets_destroy", None, [P]),
        ("rd_kafka_DeleteConsumerGroupOffsets", None, [P, ctypes.POINTER(P), ctypes.c_size_t, P, P]),
        ("rd_kafka_event_DeleteConsumerGroupOffsets_result", P, [P]),
        ("rd_kafka_DeleteConsumerGroupOffsets_result_groups", ctypes.POINTER(P), [P, ctypes.POINTER(ctypes.c_size_t)]),
        ("rd_kafka_group_result_error", P, [P]),
        ("rd_kafka_error_code", ctypes.c_int, [P]),
        ("rd_kafka_group_result_partitions", ctypes.POINTER(_PartitionList), [P]),
    ]:
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib


class _Partition(ctypes.Structure):
    _fields_ = [("topic", ctypes.c_char_p), ("partition", ctypes.c_int32), ("offset", ctypes.c_int64),
                ("metadata", ctypes.c_void_p), ("metadata_size", ctypes.c_size_t), ("opaque", ctypes.c_void_p),
                ("err", ctypes.c_int), ("_private", ctypes.c_void_p)]


class _PartitionList(ctypes.Structure):
    _fields_ = [("cnt", ctypes.c_int), ("size", ctypes.c_int), ("elems", ctypes.POINTER(_Partition))]


def delete_consumer_group_offsets(bootstrap, group, partitions, timeout_ms=15000):
    """Returns (group error code, {(topic, partition): error code}); librdkafka error codes
    are Kafka's (0 = no error)."""
    lib = _lib()
    err = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    assert lib.rd_kafka_conf_set(conf, b"bootstrap.servers", bootstrap.encode(), err, 512) == 0, err.value
    rk = lib.rd_kafka_new(0, conf, err, 512)
    assert rk, err.value
    q = lib.rd_kafka_queue_new(rk)
    parts = lib.rd_kafka_topic_partition_list_new(len(partitions))
    for topic, p in partitions:
        lib.rd_kafka_topic_partition_list_add(parts, topic.encode(), p)
    request = lib.rd_kafka_DeleteConsumerGroupOffsets_new(group.encode(), parts)
    try:
        lib.rd_kafka_DeleteConsumerGroupOffsets(rk, (ctypes.c_void_p * 1)(request), 1, None, q)
        ev = lib.rd_kafka_queue_poll(q, timeout_ms)
        assert ev, "no DeleteConsumerGroupOffsets result"
        try:
            if lib.rd_kafka_event_error(ev):
                return lib.rd_kafka_event_error(ev), {}
            res = lib.rd_kafka_event_DeleteConsumerGroupOffsets_result(ev)
            n = ctypes.c_size_t()
            groups = lib.rd_kafka_DeleteConsumerGroupOffsets_result_groups(res, ctypes.byref(n))
            g = groups[0]
            gerr = lib.rd_kafka_group_result_error(g)
            code = lib.rd_kafka_error_code(gerr) if gerr else 0
            plist = lib.rd_kafka_group_result_partitions(g)
            out = {}
            if plist:
                for i in range(plist.contents.cnt):
                    e = plist.contents.elems[i]
                    out[(e.topic.decode(), e.partition)] = e.err
            return code, out
        finally:
            lib.rd_kafka_event_destroy(ev)
    finally:
        lib.rd_kafka_DeleteConsumerGroupOffsets_destroy(request)
        lib.rd_kafka_topic_partition_list_destroy(parts)
        lib.rd_kafka_queue_destroy(q)
        lib.rd_kafka_destroy(rk)
