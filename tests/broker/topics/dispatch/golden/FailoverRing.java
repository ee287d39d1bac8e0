// Golden vectors for Failover's choice of the active consumer, computed the way Apache Pulsar does.
//
// Run: java -Dfile.encoding=UTF-8 tests/broker/topics/dispatch/golden/FailoverRing.java
// (Java 11+ runs a single source file; -Dfile.encoding=UTF-8 is the default from Java 18 on.)
// The output is pinned in tests/broker/topics/dispatch/test_failover_ring.py; regenerate it there
// by hand if the cases change.
//
// What this reproduces, from apache/pulsar (master, 3.x/4.x):
//  - pulsar-broker/src/main/java/org/apache/pulsar/broker/service/
//      AbstractDispatcherSingleActiveConsumer.java, pickAndScheduleActiveConsumer(),
//      makeHashRing(), peekConsumerIndexFromHashRing() (the ring came with apache/pulsar#19502):
//      * consumers (a CopyOnWriteArrayList in arrival order) are sorted in place by
//        (priorityLevel, consumerName.compareTo), a stable sort, so equal keys keep arrival order;
//      * when priorities differ, only the leading run with the highest priority (lowest level) is
//        eligible;
//      * partitionIndex >= 0 and activeConsumerFailoverConsistentHashing off (the default):
//        index = partitionIndex % eligible;
//      * otherwise a TreeMap ring: for each eligible consumer i, for j in 0..99 (
//        CONSUMER_CONSISTENT_HASH_REPLICAS), put(Murmur3_32Hash.makeHash((name + j).getBytes()), i)
//        (a later i overwrites a colliding point), and the topic takes
//        ceilingEntry(Murmur3Hash32.makeHash(topicName)), or firstEntry() past the end.
//  - pulsar-common/src/main/java/org/apache/pulsar/common/util/Murmur3_32Hash.java: MurmurHash3
//    x86 32-bit, seed 0, little-endian blocks, result & Integer.MAX_VALUE.
//  - pulsar-client/src/main/java/org/apache/pulsar/client/impl/Murmur3Hash32.java: makeHash(String)
//    hashes s.getBytes(UTF_8) with the above and clears the sign bit again.
// The code below is written for this test (no Pulsar or Guava dependency), step for step.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

public class FailoverRing {

    record Consumer(String name, int priority, int arrival) { }

    static int murmur3(byte[] data) {
        int h = 0;  // seed 0
        int blocks = data.length / 4;
        for (int b = 0; b < blocks; b++) {
            int i = b * 4;
            int k = (data[i] & 0xFF) | (data[i + 1] & 0xFF) << 8 | (data[i + 2] & 0xFF) << 16
                    | (data[i + 3] & 0xFF) << 24;
            h ^= mixK(k);
            h = Integer.rotateLeft(h, 13) * 5 + 0xe6546b64;
        }
        int k = 0;
        for (int r = 0; r < data.length % 4; r++) {
            k ^= (data[blocks * 4 + r] & 0xFF) << (r * 8);
        }
        h ^= mixK(k);   // Pulsar mixes the (possibly zero) tail unconditionally; mixK(0) == 0
        h ^= data.length;
        h ^= h >>> 16;
        h *= 0x85ebca6b;
        h ^= h >>> 13;
        h *= 0xc2b2ae35;
        h ^= h >>> 16;
        return h & Integer.MAX_VALUE;
    }

    static int mixK(int k) {
        k *= 0xcc9e2d51;
        k = Integer.rotateLeft(k, 15);
        return k * 0x1b873593;
    }

    /** The chosen consumer, as pickAndScheduleActiveConsumer picks it (consistent hashing off). */
    static Consumer pick(String topic, int partitionIndex, List<Consumer> arrivals) {
        List<Consumer> consumers = new ArrayList<>(arrivals);
        consumers.sort(Comparator.comparingInt(Consumer::priority).thenComparing(Consumer::name));
        int size = consumers.size();
        for (int i = 0; i < consumers.size(); i++) {
            if (consumers.get(i).priority() != consumers.get(0).priority()) {
                size = i;
                break;
            }
        }
        if (partitionIndex >= 0) {
            return consumers.get(partitionIndex % size);
        }
        TreeMap<Integer, Integer> ring = new TreeMap<>();
        for (int i = 0; i < size; i++) {
            for (int j = 0; j < 100; j++) {
                ring.put(murmur3((consumers.get(i).name() + j).getBytes()), i);
            }
        }
        int hash = murmur3(topic.getBytes(StandardCharsets.UTF_8)) & Integer.MAX_VALUE;
        Map.Entry<Integer, Integer> at = ring.ceilingEntry(hash);
        return consumers.get(at != null ? at.getValue() : ring.firstEntry().getValue());
    }

    static void emit(String topic, int partitionIndex, Object... namesAndPriorities) {
        List<Consumer> consumers = new ArrayList<>();
        for (int i = 0; i < namesAndPriorities.length; i += 2) {
            consumers.add(new Consumer((String) namesAndPriorities[i], (Integer) namesAndPriorities[i + 1],
                    consumers.size()));
        }
        Consumer chosen = pick(topic, partitionIndex, consumers);
        StringBuilder out = new StringBuilder("    (").append(py(topic)).append(", ").append(partitionIndex)
                .append(",  # ").append(py(chosen.name())).append("\n     [");
        for (Consumer c : consumers) {
            out.append("(").append(py(c.name())).append(", ").append(c.priority()).append("), ");
        }
        out.setLength(out.length() - 2);
        out.append("], ").append(chosen.arrival()).append("),");
        System.out.println(out);
    }

    /** A Python string literal (ASCII only; other characters as \\u or \\U escapes). */
    static String py(String s) {
        StringBuilder out = new StringBuilder("\"");
        s.codePoints().forEach(cp -> {
            if (cp >= 0x20 && cp < 0x7F && cp != '"' && cp != '\\') {
                out.append((char) cp);
            } else if (cp <= 0xFFFF) {
                out.append(String.format("\\u%04x", cp));
            } else {
                out.append(String.format("\\U%08x", cp));
            }
        });
        return out.append('"').toString();
    }

    public static void main(String[] args) {
        String[] topics = {
            "persistent://public/default/t",
            "persistent://public/default/orders",
            "persistent://public/default/payments-eu",
            "persistent://tenant-a/ns1/events",
            "non-persistent://public/default/ticks",
            "persistent://public/default/my-topic-partition-3",
        };
        for (String topic : topics) {
            emit(topic, -1, "solo", 0);
            emit(topic, -1, "a", 0, "b", 0);
            emit(topic, -1, "a-first", 0, "b-second", 0);
            emit(topic, -1, "gamma", 0, "alpha", 0, "beta", 0);
            emit(topic, -1, "c0", 0, "c1", 0, "c2", 0, "c3", 0);
            emit(topic, -1, "consumer-5", 0, "consumer-3", 0, "consumer-1", 0, "consumer-4", 0,
                    "consumer-2", 0);
        }
        for (int n = 0; n < 8; n++) {
            emit("persistent://public/default/spread-" + n, -1, "x", 0, "y", 0, "z", 0);
        }
        // Only the highest priority (lowest level) is eligible, for the ring and for partitions.
        emit("persistent://public/default/prio", -1, "a", 1, "b", 1, "z", 0);
        emit("persistent://public/default/prio", -1, "a", 0, "b", 1, "c", 0, "d", 2);
        emit("persistent://public/default/prio", -1, "p", 3, "q", 2, "r", 2);
        for (int p = 0; p < 5; p++) {
            emit("persistent://public/default/parted-partition-" + p, p, "b", 0, "a", 0, "c", 5);
        }
        emit("persistent://public/default/parted-partition-7", 7, "d", 1, "c", 1, "b", 1, "a", 1);
        // Equal names: the stable sort keeps arrival order, and a later consumer overwrites the
        // earlier one's ring points; with partitions, arrival order decides.
        emit("persistent://public/default/same", -1, "same", 0, "same", 0);
        emit("persistent://public/default/same", -1, "same", 0, "other", 0, "same", 0);
        emit("persistent://public/default/same-partition-1", 1, "same", 0, "same", 0, "other", 0);
        // Non-ASCII names: hashed as UTF-8; sorted by String.compareTo, i.e. by UTF-16 code unit,
        // so a character above U+FFFF (a surrogate pair, 0xD8xx first) sorts before U+E000..U+FFFF.
        emit("persistent://public/default/uni-partition-0", 0, "\uFFFD", 0, "\uD83D\uDE00", 0);
        emit("persistent://public/default/uni-partition-1", 1, "\uFFFD", 0, "\uD83D\uDE00", 0);
        emit("persistent://public/default/uni-partition-1", 1, "\uE000x", 0, "\uD800\uDC00y", 0, "zz", 0);
        emit("persistent://public/default/uni", -1, "caf\u00e9", 0, "cafe", 0, "\u00fcber", 0);
        emit("persistent://public/default/\u00fcnic\u00f6de", -1, "n1", 0, "n2", 0, "n3", 0);
    }
}
