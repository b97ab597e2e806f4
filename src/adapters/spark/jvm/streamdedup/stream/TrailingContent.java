package streamdedup.stream;

import org.apache.spark.sql.api.java.UDF1;

/**
 * Whether a record holds something other than JSON whitespace after its first JSON value, for
 * the strict path of adapters.spark.stream._parse: Spark's JSON parser reads the first value and
 * ignores what follows ({@code {"a":1} x} parses), while domain._events.parse_json refuses it
 * ({@code not_json}). It finds where the first value ends (strings, escapes and nesting
 * followed, nothing validated: the parser does that) and looks past it.
 */
public final class TrailingContent implements UDF1<byte[], Boolean> {
    @Override
    public Boolean call(byte[] b) {
        if (b == null) return null;
        int n = b.length, p = blank(b, 0);
        if (p >= n) return false;
        byte c = b[p];
        if (c == '{' || c == '[') {
            int depth = 0;
            boolean inString = false;
            for (; p < n; p++) {
                c = b[p];
                if (inString) {
                    if (c == '\\') p++;
                    else if (c == '"') inString = false;
                } else if (c == '"') {
                    inString = true;
                } else if (c == '{' || c == '[') {
                    depth++;
                } else if ((c == '}' || c == ']') && --depth == 0) {
                    p++;
                    break;
                }
            }
        } else if (c == '"') {
            for (p++; p < n; p++) {
                if (b[p] == '\\') p++;
                else if (b[p] == '"') {
                    p++;
                    break;
                }
            }
        } else {
            while (p < n && !isBlank(b[p]) && b[p] != '{' && b[p] != '[' && b[p] != '"') p++;
        }
        return blank(b, p) < n;
    }

    private static int blank(byte[] b, int p) {
        while (p < b.length && isBlank(b[p])) p++;
        return p;
    }

    private static boolean isBlank(byte c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
    }
}
