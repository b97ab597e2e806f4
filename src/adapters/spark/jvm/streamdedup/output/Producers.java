package streamdedup.output;

import java.time.Duration;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The executor JVM's Kafka producers, kept between micro-batches (creating one, and starting
 * its transactions, costs round trips). A producer is leased by one task at a time: a
 * transactional one per transactional id, an at-least-once one per partition. A task's first
 * attempt reuses the producer its partition's last task released; a retried attempt always
 * starts a new one, whose {@code initTransactions} fences the attempt before it and aborts
 * whatever transaction it left open. A producer that failed is closed, never reused; one left
 * unused for {@link #IDLE} is closed.
 */
final class Producers {
    static final long IDLE = 10 * 60 * 1000L;
    private static final Map<String, Lease> IDLE_LEASES = new HashMap<>();

    private Producers() {
    }

    static final class Lease {
        final String key;
        final KafkaProducer<byte[], byte[]> producer;
        long released;

        Lease(String key, KafkaProducer<byte[], byte[]> producer) {
            this.key = key;
            this.producer = producer;
        }
    }

    /** A producer for {@code id} (transactional, started) or, with id null, for at-least-once {@code partition}. */
    static Lease acquire(Map<String, String> config, String id, int partition, boolean fresh) {
        String key = new TreeMap<>(config) + "|" + (id == null ? "p" + partition : id);
        Lease cached;
        synchronized (IDLE_LEASES) {
            cached = IDLE_LEASES.remove(key);
        }
        if (cached != null && !fresh) return cached;
        if (cached != null) close(cached, false);
        Map<String, Object> settings = new HashMap<>(config);
        if (id != null) settings.put("transactional.id", id);
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(settings, new ByteArraySerializer(),
                new ByteArraySerializer());
        try {
            if (id != null) producer.initTransactions();
        } catch (RuntimeException failed) {
            producer.close(Duration.ofSeconds(5));
            throw failed;
        }
        return new Lease(key, producer);
    }

    static void release(Lease lease) {
        long now = System.currentTimeMillis();
        lease.released = now;
        synchronized (IDLE_LEASES) {
            Lease replaced = IDLE_LEASES.put(lease.key, lease);
            if (replaced != null && replaced != lease) close(replaced, false);
            for (Iterator<Lease> it = IDLE_LEASES.values().iterator(); it.hasNext(); ) {
                Lease idle = it.next();
                if (now - idle.released > IDLE) {
                    it.remove();
                    close(idle, false);
                }
            }
        }
    }

    /** A failed producer: its transaction aborted (when it has one) and closed. */
    static void discard(Lease lease, boolean transactional) {
        close(lease, transactional);
    }

    static void closeAll() {
        synchronized (IDLE_LEASES) {
            for (Lease lease : IDLE_LEASES.values()) close(lease, false);
            IDLE_LEASES.clear();
        }
    }

    private static void close(Lease lease, boolean abort) {
        try {
            if (abort) lease.producer.abortTransaction();
        } catch (RuntimeException ignored) {
            // fenced, or no transaction open: the next initTransactions of this id resolves it
        }
        try {
            lease.producer.close(Duration.ofSeconds(5));
        } catch (RuntimeException ignored) {
            // closing a broken producer: nothing more to release
        }
    }
}
