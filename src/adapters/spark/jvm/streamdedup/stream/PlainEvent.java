package streamdedup.stream;

import java.nio.charset.StandardCharsets;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

/**
 * The fast path of adapters.spark.stream._parse: one pass over a record's bytes that recognises a
 * plain, valid event and returns its fields (id, uniqueValue, type, timestamp), or null.
 *
 * Null means "not certified": the record then takes the strict path, which gives the
 * domain's verdict (domain._events.parse_event). So this scanner only has to be sound: it
 * returns fields only for a record the strict checks accept with exactly these values.
 * It certifies a record when it is one UTF-8 JSON object (JSON whitespace around it, nothing
 * after it), every member's value is valid JSON (nesting up to {@value #MAX_DEPTH}), each
 * required field occurs once, the three string fields are unescaped printable ASCII with a
 * non-space character, and the timestamp is an integer token (no fraction or exponent) in
 * 0..{@value #MAX_TIMESTAMP}. Anything else (escaped member names, escapes or non-ASCII in
 * a required field, a member name given twice in one object at any depth, NaN or Infinity,
 * unusual numbers) is left to the strict path, which refuses what domain._events.parse_json refuses.
 */
public final class PlainEvent implements UDF1<byte[], Row> {
    /** domain._events.MAX_TIMESTAMP (tests/adapters/spark/stream/test_parse.py pins both sides of it). */
    public static final long MAX_TIMESTAMP = 253_402_300_799L;
    public static final int MAX_DEPTH = 64;
    /** Python's int() refuses longer digit strings (sys.int_max_str_digits); json.loads then fails. */
    private static final int MAX_DIGITS = 4300;
    private static final byte[][] REQUIRED = {
        "id".getBytes(StandardCharsets.US_ASCII), "uniqueValue".getBytes(StandardCharsets.US_ASCII),
        "type".getBytes(StandardCharsets.US_ASCII), "timestamp".getBytes(StandardCharsets.US_ASCII)};
    private static final int TIMESTAMP = 3, OTHER = -1;

    /** The task this instance last served, and its test slow-down ({@link SlowTasks}): none in production. */
    private transient long task = -1;
    private transient long slowMicros;

    @Override
    public Row call(byte[] value) {
        TaskContext context = TaskContext.get();
        if (context != null && context.taskAttemptId() != task) {
            task = context.taskAttemptId();
            slowMicros = SlowTasks.micros("source");
        }
        SlowTasks.pause(slowMicros, 1);
        if (value == null) return null;
        Scan scan = new Scan(value);
        if (!scan.event()) return null;
        return RowFactory.create(scan.strings[0], scan.strings[1], scan.strings[2], scan.timestamp);
    }

    private static final class Scan {
        private final byte[] b;
        private int p;
        private boolean escaped;
        final String[] strings = new String[3];
        long timestamp = -1;

        Scan(byte[] bytes) {
            this.b = bytes;
        }

        boolean event() {
            java.util.Set<String> names = new java.util.HashSet<>();
            ws();
            if (!take('{')) return false;
            ws();
            if (take('}')) return false;
            do {
                ws();
                int start = p + 1;
                if (!string() || escaped) return false;  // an escaped name may spell a required one
                if (!names.add(new String(b, start, p - 1 - start, StandardCharsets.ISO_8859_1))) return false;
                int field = required(start, p - 1);
                ws();
                if (!take(':')) return false;
                ws();
                if (!(field == OTHER ? value(1) : field == TIMESTAMP ? timestamp() : requiredString(field))) {
                    return false;
                }
                ws();
            } while (take(','));
            if (!take('}')) return false;
            ws();
            return p == b.length && timestamp >= 0 && strings[0] != null && strings[1] != null && strings[2] != null;
        }

        private int required(int start, int end) {
            for (int i = 0; i < REQUIRED.length; i++) {
                byte[] name = REQUIRED[i];
                if (name.length == end - start && java.util.Arrays.equals(b, start, end, name, 0, name.length)) return i;
            }
            return OTHER;
        }

        private boolean requiredString(int field) {
            if (strings[field] != null || !take('"')) return false;
            int start = p;
            boolean visible = false;
            while (p < b.length) {
                byte c = b[p];
                if (c == '"') {
                    if (!visible) return false;
                    strings[field] = new String(b, start, p - start, StandardCharsets.ISO_8859_1);
                    p++;
                    return true;
                }
                if (c < 0x20 || c == '\\' || c == 0x7f) return false;  // control, escape or non-ASCII (c < 0)
                visible |= c != ' ';
                p++;
            }
            return false;
        }

        private boolean timestamp() {
            if (timestamp >= 0) return false;
            boolean negative = take('-');
            int start = p;
            long t = 0;
            while (p < b.length && b[p] >= '0' && b[p] <= '9') {
                if (p - start >= 12) return false;
                t = t * 10 + (b[p] - '0');
                p++;
            }
            int digits = p - start;
            if (digits == 0 || (digits > 1 && b[start] == '0')) return false;
            if (p < b.length && (b[p] == '.' || b[p] == 'e' || b[p] == 'E')) return false;
            if ((negative && t != 0) || t > MAX_TIMESTAMP) return false;
            timestamp = t;
            return true;
        }

        private boolean value(int depth) {
            if (p >= b.length || depth > MAX_DEPTH) return false;
            switch (b[p]) {
                case '"': return string();
                case '{': return members(depth);
                case '[': return elements(depth);
                case 't': return word("true");
                case 'f': return word("false");
                case 'n': return word("null");
                default: return number();
            }
        }

        private boolean members(int depth) {
            p++;
            ws();
            if (take('}')) return true;
            java.util.Set<String> names = new java.util.HashSet<>();
            do {
                ws();
                int start = p + 1;
                if (!string() || escaped) return false;
                if (!names.add(new String(b, start, p - 1 - start, StandardCharsets.ISO_8859_1))) return false;
                ws();
                if (!take(':')) return false;
                ws();
                if (!value(depth + 1)) return false;
                ws();
            } while (take(','));
            return take('}');
        }

        private boolean elements(int depth) {
            p++;
            ws();
            if (take(']')) return true;
            do {
                ws();
                if (!value(depth + 1)) return false;
                ws();
            } while (take(','));
            return take(']');
        }

        private boolean word(String word) {
            if (p + word.length() > b.length) return false;
            for (int i = 0; i < word.length(); i++) {
                if (b[p + i] != word.charAt(i)) return false;
            }
            p += word.length();
            return true;
        }

        /** A JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
        private boolean number() {
            take('-');
            int start = p;
            if (digits() == 0 || (b[start] == '0' && p - start > 1) || p - start > MAX_DIGITS) return false;
            if (take('.') && digits() == 0) return false;
            if (p < b.length && (b[p] == 'e' || b[p] == 'E')) {
                p++;
                if (!take('+')) take('-');
                if (digits() == 0) return false;
            }
            return true;
        }

        private int digits() {
            int start = p;
            while (p < b.length && b[p] >= '0' && b[p] <= '9') p++;
            return p - start;
        }

        /** A JSON string at p (valid escapes, no control characters, valid UTF-8); sets escaped. */
        private boolean string() {
            escaped = false;
            if (!take('"')) return false;
            while (p < b.length) {
                int c = b[p] & 0xff;
                if (c == '"') {
                    p++;
                    return true;
                }
                if (c == '\\') {
                    escaped = true;
                    if (!escape()) return false;
                } else if (c < 0x20) {
                    return false;
                } else if (c < 0x80) {
                    p++;
                } else if (!utf8(c)) {
                    return false;
                }
            }
            return false;
        }

        private boolean escape() {
            if (p + 1 >= b.length) return false;
            byte c = b[p + 1];
            if (c == 'u') {
                if (p + 6 > b.length) return false;
                int code = 0;
                for (int i = p + 2; i < p + 6; i++) {
                    int d = Character.digit(b[i], 16);
                    if (d < 0) return false;
                    code = code * 16 + d;
                }
                if (code >= 0xD800 && code <= 0xDFFF) return false;  // surrogates: the strict path decides
                p += 6;
                return true;
            }
            if ("\"\\/bfnrt".indexOf(c) < 0) return false;
            p += 2;
            return true;
        }

        /** One well-formed UTF-8 sequence starting with lead byte c (no overlongs, surrogates or > U+10FFFF). */
        private boolean utf8(int c) {
            int n, low = 0x80, high = 0xBF;
            if (c >= 0xC2 && c <= 0xDF) {
                n = 1;
            } else if (c >= 0xE0 && c <= 0xEF) {
                n = 2;
                if (c == 0xE0) low = 0xA0;
                if (c == 0xED) high = 0x9F;
            } else if (c >= 0xF0 && c <= 0xF4) {
                n = 3;
                if (c == 0xF0) low = 0x90;
                if (c == 0xF4) high = 0x8F;
            } else {
                return false;
            }
            if (p + n >= b.length) return false;
            for (int i = 1; i <= n; i++) {
                int next = b[p + i] & 0xff;
                if (next < (i == 1 ? low : 0x80) || next > (i == 1 ? high : 0xBF)) return false;
            }
            p += n + 1;
            return true;
        }

        private boolean take(char c) {
            if (p < b.length && b[p] == c) {
                p++;
                return true;
            }
            return false;
        }

        private void ws() {
            while (p < b.length) {
                byte c = b[p];
                if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
                p++;
            }
        }
    }
}
