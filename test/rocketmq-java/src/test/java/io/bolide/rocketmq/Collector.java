package io.bolide.rocketmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageId;

/**
 * Collects consumed messages by msgId (UNIQ_KEY) from listener threads, and checks them against what
 * the producer was told.
 */
final class Collector {

    /** One consumption of a message: the message and when it arrived (System.currentTimeMillis). */
    record Delivery(MessageExt msg, long atMillis) {
    }

    private final Map<String, List<Delivery>> byId = new ConcurrentHashMap<>();

    void add(MessageExt m) {
        byId.computeIfAbsent(m.getMsgId(), k -> java.util.Collections.synchronizedList(new ArrayList<>()))
                .add(new Delivery(m, System.currentTimeMillis()));
    }

    void addAll(Collection<MessageExt> ms) {
        ms.forEach(this::add);
    }

    /** Distinct messages seen. */
    int distinct() {
        return byId.size();
    }

    /** Every delivery of msgId, in order of arrival (empty if none). */
    List<Delivery> deliveries(String msgId) {
        List<Delivery> l = byId.get(msgId);
        if (l == null) {
            return List.of();
        }
        synchronized (l) {
            return new ArrayList<>(l);
        }
    }

    /** The first delivery of msgId, or null. */
    MessageExt first(String msgId) {
        List<Delivery> l = deliveries(msgId);
        return l.isEmpty() ? null : l.get(0).msg();
    }

    /** Waits until n distinct messages arrived. */
    void awaitDistinct(int n, Duration timeout) {
        CompatTest.await(timeout, () -> distinct() >= n, () -> "consumed " + distinct() + " distinct messages, want " + n);
    }

    /** msgIds consumed more than once, with their counts. */
    Map<String, Integer> duplicates() {
        return byId.entrySet().stream().filter(e -> e.getValue().size() > 1)
                .collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().size(), (a, b) -> a, TreeMap::new));
    }

    /**
     * Checks what a consumer saw of a message against the producer's SendResult: the unique id, the
     * offset id (and that it encodes the store host and CommitLog offset of the message), topic,
     * queue, queue offset, and no reconsumption.
     */
    static void assertMatches(SendResult sr, MessageExt m) {
        assertNotNull(m, "message " + sr.getMsgId() + " was not consumed");
        assertEquals(sr.getMsgId(), m.getMsgId(), "msgId (UNIQ_KEY)");
        assertEquals(sr.getMsgId(), m.getProperty("UNIQ_KEY"), "UNIQ_KEY property");
        assertTrue(m instanceof MessageClientExt, "a consumed message is a MessageClientExt");
        assertEquals(sr.getOffsetMsgId(), ((MessageClientExt) m).getOffsetMsgId(), "offsetMsgId of " + sr.getMsgId());
        assertEquals(sr.getMessageQueue().getTopic(), m.getTopic(), "topic");
        assertEquals(sr.getMessageQueue().getQueueId(), m.getQueueId(), "queueId of " + sr.getMsgId());
        assertEquals(sr.getQueueOffset(), m.getQueueOffset(), "queueOffset of " + sr.getMsgId());
        assertEquals(0, m.getReconsumeTimes(), "reconsumeTimes");
        assertOffsetMsgId(m);
    }

    /** The consumed message's offset id names its store host and CommitLog offset. */
    static void assertOffsetMsgId(MessageExt m) {
        String offsetMsgId = ((MessageClientExt) m).getOffsetMsgId();
        assertNotNull(offsetMsgId, "offsetMsgId");
        assertEquals(32, offsetMsgId.length(), "offsetMsgId " + offsetMsgId + " is 16 bytes in hex (IPv4)");
        MessageId id;
        try {
            id = MessageDecoder.decodeMessageId(offsetMsgId);
        } catch (UnknownHostException e) {
            throw new AssertionError("offsetMsgId " + offsetMsgId + " does not decode", e);
        }
        assertEquals(m.getCommitLogOffset(), id.getOffset(), "CommitLog offset in offsetMsgId " + offsetMsgId);
        SocketAddress store = m.getStoreHost();
        assertEquals(((InetSocketAddress) store).getPort(), ((InetSocketAddress) id.getAddress()).getPort(),
                "store host port in offsetMsgId " + offsetMsgId);
    }
}
