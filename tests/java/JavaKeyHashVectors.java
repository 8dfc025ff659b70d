// Prints the expected Java hashCode, Flink key group and Flink subtask of key
// values of every type tidemark's key_by accepts.  The output is committed as
// tests/data/java_key_hash_vectors.txt and read by tests/java_key_hash_test.cc;
// Java is not needed to build or test tidemark, only to regenerate the file:
//
//   javac -d /tmp/jkh tests/java/JavaKeyHashVectors.java &&
//     java -cp /tmp/jkh JavaKeyHashVectors > tests/data/java_key_hash_vectors.txt
//
// (OpenJDK 17.)  The hash codes come from the JDK itself: String keys are made
// with new String(bytes, StandardCharsets.UTF_8) (or from UTF-16 code units),
// numbers are boxed and asked for hashCode().  Two things are re-stated here
// rather than taken from Flink (no Flink jar is needed):
//   - Flink's TupleN.hashCode: h = 0; for each field h = 31 * h + field.hashCode()
//     (Tuple0 hashes to 0, Tuple1 to its field's hash);
//   - Flink's MathUtils.murmurHash and KeyGroupRangeAssignment:
//     key group = murmur(hashCode) % maxParallelism,
//     subtask   = key group * parallelism / maxParallelism.
//
// Line format (one key a line; '#' starts a comment):
//   <category> <value> hash=<hashCode> kg/<maxP>=<key group>... sub/<maxP>/<p>=<subtask>...
// Values are typed:
//   utf8:<hex bytes>          String decoded from these UTF-8 bytes
//   utf16:<hex code units>    String made of these UTF-16 code units (4 hex digits each)
//   int:<dec> long:<dec> short:<dec> byte:<dec>   Integer, Long, Short, Byte
//   char:<4 hex>              Character (one UTF-16 code unit)
//   boolean:true|false        Boolean
//   float:<8 hex>             Float with these bits (Float.intBitsToFloat)
//   double:<16 hex>           Double with these bits (Double.longBitsToDouble)
//   (<value>,<value>,...)     Flink TupleN of these fields (nests)

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

public final class JavaKeyHashVectors {

  // (max parallelism, parallelism) pairs printed for every key.
  private static final int[][] PARALLELISM = {
    {128, 1}, {128, 2}, {128, 3}, {128, 4}, {1000, 3}, {32768, 7}
  };

  // A key value: the Java object whose hashCode() Flink would use, and its
  // typed text.
  private static final class Key {
    final Object value;
    final String text;

    Key(Object value, String text) {
      this.value = value;
      this.text = text;
    }
  }

  // Flink's TupleN: fields hashed as h = 31 * h + field.hashCode(), from 0.
  private static final class FlinkTuple {
    final Object[] fields;

    FlinkTuple(Object... fields) {
      this.fields = fields;
    }

    @Override
    public int hashCode() {
      int h = 0;
      for (Object f : fields) {
        h = 31 * h + (f == null ? 0 : f.hashCode());
      }
      return h;
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof FlinkTuple && Arrays.equals(fields, ((FlinkTuple) o).fields);
    }
  }

  // Flink's murmur hash of an int: murmur3's mixing of a single 4-byte block
  // (seed 0) and its finaliser, then the sign dropped (MIN_VALUE -> 0).
  static int murmur(int k) {
    int h = k * 0xcc9e2d51;
    h = Integer.rotateLeft(h, 15) * 0x1b873593;
    h = Integer.rotateLeft(h, 13) * 5 + 0xe6546b64;
    h ^= 4;  // length in bytes
    h = (h ^ (h >>> 16)) * 0x85ebca6b;
    h = (h ^ (h >>> 13)) * 0xc2b2ae35;
    h ^= h >>> 16;
    if (h == Integer.MIN_VALUE) {
      return 0;
    }
    return Math.abs(h);
  }

  // ---------------------------------------------------------------- values

  static String hex(byte[] bytes) {
    StringBuilder sb = new StringBuilder();
    for (byte b : bytes) {
      sb.append(String.format("%02x", b & 0xff));
    }
    return sb.toString();
  }

  static byte[] bytes(String hex) {
    hex = hex.replace(" ", "");
    byte[] out = new byte[hex.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  static String units(String s) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < s.length(); i++) {
      if (i > 0) {
        sb.append(' ');
      }
      sb.append(String.format("%04X", (int) s.charAt(i)));
    }
    return sb.toString();
  }

  static Key utf8(byte[] b) {
    return new Key(new String(b, StandardCharsets.UTF_8), "utf8:" + hex(b));
  }

  static Key utf8(String hexBytes) {
    return utf8(bytes(hexBytes));
  }

  static Key text(String s) {
    return utf8(s.getBytes(StandardCharsets.UTF_8));
  }

  static Key utf16(char... cs) {
    StringBuilder t = new StringBuilder("utf16:");
    for (char c : cs) {
      t.append(String.format("%04x", (int) c));
    }
    return new Key(new String(cs), t.toString());
  }

  static Key i(int v) {
    return new Key(v, "int:" + v);
  }

  static Key l(long v) {
    return new Key(v, "long:" + v);
  }

  static Key s(short v) {
    return new Key(v, "short:" + v);
  }

  static Key b(byte v) {
    return new Key(v, "byte:" + v);
  }

  static Key c(char v) {
    return new Key(v, String.format("char:%04x", (int) v));
  }

  static Key z(boolean v) {
    return new Key(v, "boolean:" + v);
  }

  static Key f(float v) {
    return fbits(Float.floatToRawIntBits(v));
  }

  static Key fbits(int bits) {
    return new Key(Float.intBitsToFloat(bits), String.format("float:%08x", bits));
  }

  static Key d(double v) {
    return dbits(Double.doubleToRawLongBits(v));
  }

  static Key dbits(long bits) {
    return new Key(Double.longBitsToDouble(bits), String.format("double:%016x", bits));
  }

  static Key t(Key... fields) {
    Object[] values = new Object[fields.length];
    StringBuilder sb = new StringBuilder("(");
    for (int k = 0; k < fields.length; k++) {
      values[k] = fields[k].value;
      if (k > 0) {
        sb.append(',');
      }
      sb.append(fields[k].text);
    }
    return new Key(new FlinkTuple(values), sb.append(')').toString());
  }

  // ---------------------------------------------------------------- output

  static void print(String category, Key key, String comment) {
    int hash = key.value.hashCode();
    StringBuilder sb = new StringBuilder();
    sb.append(category).append(' ').append(key.text).append(" hash=").append(hash);
    int lastMaxP = -1;
    for (int[] mp : PARALLELISM) {
      int maxP = mp[0];
      int p = mp[1];
      int keyGroup = murmur(hash) % maxP;
      if (maxP != lastMaxP) {
        sb.append(" kg/").append(maxP).append('=').append(keyGroup);
        lastMaxP = maxP;
      }
      sb.append(" sub/").append(maxP).append('/').append(p).append('=');
      sb.append(keyGroup * p / maxP);
    }
    if (comment != null && !comment.isEmpty()) {
      sb.append("  # ").append(comment);
    }
    System.out.println(sb);
  }

  static void print(String category, Key key) {
    print(category, key, null);
  }

  // A UTF-8 case, commented with what it decodes to.
  static void bytesCase(String category, String hexBytes, String what) {
    Key k = utf8(hexBytes);
    print(category, k, what + " -> [" + units((String) k.value) + "]");
  }

  public static void main(String[] args) {
    System.out.println("# Generated by tests/java/JavaKeyHashVectors.java with "
        + System.getProperty("java.vm.name") + " " + System.getProperty("java.version")
        + "; do not edit.");
    System.out.println("# Regenerate: javac -d /tmp/jkh tests/java/JavaKeyHashVectors.java && "
        + "java -cp /tmp/jkh JavaKeyHashVectors > tests/data/java_key_hash_vectors.txt");

    // --- well-formed UTF-8 (BMP) -----------------------------------------
    for (String s : new String[] {"", "a", "hello", "Flink", "key-1", "sensor_7", "Aa", "BB",
        "polygenelubricants", "\u0000", "a\u0000b", "\u007f", "\u0080", "\u00e9", "caf\u00e9",
        "\u07ff", "\u0800", "\u65e5\u672c", "\ud7ff", "\ue000", "\ufffd", "\ufffe", "\uffff",
        "\u00ff\u0100 \u20ac \u2603"}) {
      print("utf8-valid", text(s), "[" + units(s) + "]");
    }

    // --- well-formed UTF-8, supplementary (surrogate pairs in UTF-16) -----
    for (String hexBytes : new String[] {"f0908080", "f09f9880", "61f09f988062", "f0aaaaaa",
        "f3a08081", "f48fbfbf", "f09f9880f09f9881", "e697a5f09f9880"}) {
      bytesCase("utf8-supplementary", hexBytes, "valid");
    }

    // --- malformed UTF-8 -------------------------------------------------
    String[][] malformed = {
      // lone continuation bytes and bytes that never start a sequence
      {"80", "lone continuation"}, {"bf", "lone continuation"}, {"61 80 62", "lone continuation"},
      {"80 80 80", "three lone continuations"}, {"fe", "FE"}, {"ff", "FF"},
      {"f5", "F5"}, {"f8 88 80 80 80", "5-byte form"}, {"fc 84 80 80 80 80", "6-byte form"},
      {"f5 80 80 80", "F5 + 3 continuations (> U+10FFFF)"},
      {"f7 bf bf bf", "F7 + 3 continuations (> U+10FFFF)"}, {"61 ff 62", "FF between ASCII"},
      // truncated sequences, at the end and followed by something else
      {"c3", "truncated 2-byte at end"}, {"c3 41", "truncated 2-byte before ASCII"},
      {"c3 c3 a9", "truncated 2-byte before a valid one"},
      {"e6", "truncated 3-byte (1 of 3) at end"}, {"e6 97", "truncated 3-byte (2 of 3) at end"},
      {"e6 41", "truncated 3-byte (1 of 3) before ASCII"},
      {"e6 97 41", "truncated 3-byte (2 of 3) before ASCII"},
      {"e6 97 e6 97 a5", "truncated 3-byte before a valid one"},
      {"e0 a0", "truncated 3-byte E0 A0 at end"}, {"ed 9f", "truncated 3-byte ED 9F at end"},
      {"f0", "truncated 4-byte (1 of 4) at end"}, {"f0 9f", "truncated 4-byte (2 of 4) at end"},
      {"f0 9f 98", "truncated 4-byte (3 of 4) at end"},
      {"f0 41", "truncated 4-byte (1 of 4) before ASCII"},
      {"f0 9f 41", "truncated 4-byte (2 of 4) before ASCII"},
      {"f0 9f 98 41", "truncated 4-byte (3 of 4) before ASCII"},
      {"f0 9f 98 41 42", "truncated 4-byte (3 of 4) before two ASCII"},
      {"f0 9f 41 42", "truncated 4-byte (2 of 4) before two ASCII"},
      {"f0 9f 98 f0 9f 98 80", "truncated 4-byte before a valid one"},
      {"f4 8f bf", "truncated 4-byte F4 8F BF at end"}, {"f1 80", "truncated 4-byte F1 80 at end"},
      {"e6 97 a5 e6 97", "valid 3-byte then truncated"},
      // overlong encodings
      {"c0 80", "overlong NUL (2-byte)"}, {"c1 bf", "overlong 2-byte"}, {"c0", "C0 alone"},
      {"e0 80 80", "overlong NUL (3-byte)"}, {"e0 9f bf", "overlong 3-byte U+07FF"},
      {"e0 80", "overlong 3-byte, truncated"}, {"e0 9f", "overlong 3-byte, truncated"},
      {"f0 80 80 80", "overlong NUL (4-byte)"}, {"f0 8f bf bf", "overlong 4-byte U+FFFF"},
      {"f0 8f", "overlong 4-byte, truncated"}, {"f0 80 80", "overlong 4-byte, truncated"},
      // UTF-16 surrogates encoded in UTF-8 (CESU-8 / WTF-8)
      {"ed a0 80", "surrogate U+D800"}, {"ed bf bf", "surrogate U+DFFF"},
      {"ed b0 80", "surrogate U+DC00"}, {"ed a0 bd ed b8 80", "surrogate pair D83D DE00 (CESU-8)"},
      {"ed a0", "surrogate, truncated"}, {"ed a0 41", "surrogate (2 of 3) before ASCII"},
      {"ed a0 80 41", "surrogate then ASCII"},
      // above U+10FFFF
      {"f4 90 80 80", "U+110000"}, {"f4 bf bf bf", "> U+10FFFF"}, {"f4 90", "F4 90 truncated"},
      {"f4 90 41", "F4 90 before ASCII"},
      // mixtures
      {"61 c3 e6 97 f0 9f 98 62", "three truncated sequences between ASCII"},
      {"c3 a9 80 e6 97 a5 bf", "valid, continuation, valid, continuation"},
      {"e6 97 a5 ed a0 80 f0 9f 98 80", "valid, surrogate, valid supplementary"},
    };
    for (String[] m : malformed) {
      bytesCase("utf8-malformed", m[0], m[1]);
    }

    // --- random bytes biased to UTF-8 edge cases (fixed seed) -------------
    int[] alphabet = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2,
        0xc3, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xf7, 0xf8,
        0xfe, 0xff};
    Random random = new Random(20240610L);
    for (int n = 0; n < 600; n++) {
      byte[] b = new byte[1 + random.nextInt(8)];
      for (int k = 0; k < b.length; k++) {
        b[k] = random.nextInt(4) == 0 ? (byte) random.nextInt(256)
                                       : (byte) alphabet[random.nextInt(alphabet.length)];
      }
      Key k = utf8(b);
      print("utf8-random", k, "[" + units((String) k.value) + "]");
    }

    // --- strings from UTF-16 code units (std::u16string) ------------------
    print("utf16", utf16());
    print("utf16", utf16('h', 'e', 'l', 'l', 'o'));
    print("utf16", utf16('\u00e9', '\u65e5'));
    print("utf16", utf16('\ud83d', '\ude00'), "surrogate pair");
    print("utf16", utf16('\ud83d'), "lone high surrogate (kept by Java)");
    print("utf16", utf16('a', '\ude00', 'b'), "lone low surrogate (kept by Java)");
    print("utf16", utf16('\uffff', '\u0000'));

    // --- Boolean ----------------------------------------------------------
    print("boolean", z(true));
    print("boolean", z(false));

    // --- Character --------------------------------------------------------
    for (int u : new int[] {0x00, 0x30, 0x41, 0x61, 0x7f, 0x80, 0xa9, 0xe9, 0xff, 0x100, 0x20ac,
        0xd800, 0xdfff, 0xfffd, 0xffff}) {
      print("char", c((char) u));
    }

    // --- Byte, Short, Integer, Long ----------------------------------------
    for (int v : new int[] {0, 1, -1, 42, 127, -128, -7}) {
      print("byte", b((byte) v));
    }
    for (int v : new int[] {0, 1, -1, -3, 42, 255, 256, 32767, -32768, 12345}) {
      print("short", s((short) v));
    }
    for (int v : new int[] {0, 1, 2, -1, -7, 42, 1000000, Integer.MAX_VALUE, Integer.MIN_VALUE,
        -2089875627}) {
      print("int", i(v));
    }
    for (long v : new long[] {0L, 1L, -1L, 42L, 1L << 32, (1L << 40) + 5, 1538359894000L,
        Long.MAX_VALUE, Long.MIN_VALUE, 0xffffffffL, -(1L << 32), 0x123456789abcdefL}) {
      print("long", l(v));
    }

    // --- Float --------------------------------------------------------------
    float[] floats = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 3.4028235e38f, -3.4028235e38f, 1.4e-45f,
        1.17549435e-38f, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, 16777217.0f, 42.5f};
    for (float v : floats) {
      print("float", f(v), Float.toString(v));
    }
    // NaNs: every NaN hashes as the canonical 0x7fc00000 (floatToIntBits).
    for (int bits : new int[] {0x7fc00000, 0x7f800001, 0xffc00000, 0x7fffffff, 0xff800001}) {
      print("float", fbits(bits), "NaN");
    }

    // --- Double -------------------------------------------------------------
    double[] doubles = {0.0, -0.0, 1.0, -1.0, 0.1, 2.5, 1e300, -1e-300, Double.MAX_VALUE,
        Double.MIN_VALUE, Double.MIN_NORMAL, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY,
        1538359894000.0, 4294967296.0, 9007199254740993.0, 42.0};
    for (double v : doubles) {
      print("double", d(v), Double.toString(v));
    }
    // NaNs: every NaN hashes as the canonical 0x7ff8000000000000L (doubleToLongBits).
    for (long bits : new long[] {0x7ff8000000000000L, 0x7ff0000000000001L, 0xfff8000000000000L,
        0x7fffffffffffffffL, 0xfff0000000000001L}) {
      print("double", dbits(bits), "NaN");
    }

    // --- Tuple2 (std::pair / two-field std::tuple) ---------------------------
    print("tuple2", t(text("hello"), i(1)));
    print("tuple2", t(text("sensor_7"), i(-7)));
    print("tuple2", t(text(""), i(0)));
    print("tuple2", t(utf8("e6 97"), i(Integer.MIN_VALUE)), "malformed string field");
    print("tuple2", t(l(1538359894000L), text("key-1")));
    print("tuple2", t(l(-1L), text("\u00e9")));
    print("tuple2", t(d(-0.0), z(true)));
    print("tuple2", t(dbits(0x7ff0000000000001L), z(false)), "NaN field");
    print("tuple2", t(d(2.5), z(false)));
    print("tuple2", t(i(1), i(2)));
    print("tuple2", t(i(2), i(1)));
    print("tuple2", t(i(Integer.MAX_VALUE), i(Integer.MAX_VALUE)));

    // --- TupleN (std::tuple) ---------------------------------------------------
    print("tuple", t(), "Tuple0");
    print("tuple", t(text("hello")), "Tuple1");
    print("tuple", t(i(42)), "Tuple1");
    print("tuple", t(i(7), l(1L << 40), text("Flink")), "Tuple3");
    print("tuple", t(i(-1), l(-1L), text("")), "Tuple3");
    print("tuple", t(f(1.5f), c('x'), s((short) -3), b((byte) -128), d(-0.0)), "Tuple5");
    print("tuple", t(fbits(0x7f800001), c('\u20ac'), s((short) 32767), b((byte) 1), d(1e300)),
        "Tuple5");
    for (int base : new int[] {0, 1, 1000}) {
      Key[] fields = new Key[25];
      for (int k = 0; k < 25; k++) {
        fields[k] = i(base + k);
      }
      print("tuple", t(fields), "Tuple25");
    }

    // --- nested tuples -----------------------------------------------------------
    print("tuple-nested", t(t(text("a"), i(1)), l(2L)));
    print("tuple-nested", t(t(text("sensor_7"), i(-7)), l(1538359894000L)));
    print("tuple-nested", t(i(3), t(d(0.1), t(text("x"), z(true)))));
    print("tuple-nested", t(i(-3), t(d(-0.0), t(utf8("ed a0 80"), z(false)))));
    print("tuple-nested", t(t(i(1), i(2)), t(i(3), i(4))));
    print("tuple-nested", t(t(i(4), i(3)), t(i(2), i(1))));
  }
}
