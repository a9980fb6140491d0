package tabletopic;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.ContentFileParser;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.Table;
import org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonGenerator;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.JsonNode;
import org.apache.iceberg.util.JsonUtil;

/**
 * Content files as answers carry them over the control topic: Iceberg's own JSON form, written and
 * read back, and checked against the table they claim to belong to.
 */
public final class ContentFiles {
  private ContentFiles() {}

  /**
   * Writes {@code files} as a JSON array of Iceberg content files (the REST spec's {@code ContentFile}
   * form, written by Iceberg's own {@code ContentFileParser}), so a worker can hand them to a
   * coordinator over the control topic. Nothing Java-serialised ever crosses Kafka.
   */
  static void writeFiles(JsonGenerator json, Table table, List<ContentFile<?>> files) throws IOException {
    json.writeStartArray();
    for (ContentFile<?> file : files) {
      ContentFileParser.toJson(file, table.specs().get(file.specId()), json);
    }
    json.writeEndArray();
  }

  /**
   * Checks the files of an answer against their tables: {@code filesByTableJson} maps each table's
   * name to what {@link #writeFiles} wrote for it, and {@code tables} holds tables by name. Answers,
   * as a JSON object, why the first that cannot be read cannot ({@code invalid}, or null), and the
   * tables {@code tables} did not hold ({@code unchecked}). One call for an answer's tables, where a
   * call each took a thousand a round.
   */
  public static String invalidFiles(Map<String, Table> tables, String filesByTableJson) throws IOException {
    JsonNode byTable = JsonUtil.mapper().readTree(filesByTableJson);
    Iterator<Map.Entry<String, JsonNode>> entries = byTable.fields();
    List<String> unchecked = new ArrayList<>();
    String invalid = null;
    while (entries.hasNext() && invalid == null) {
      Map.Entry<String, JsonNode> entry = entries.next();
      Table table = tables.get(entry.getKey());
      if (table == null) {
        unchecked.add(entry.getKey());
        continue;
      }
      try {
        filesFromJson(table, entry.getValue().toString());
      } catch (RuntimeException | IOException e) {
        invalid = "files for " + entry.getKey() + " cannot be read: " + e.getMessage();
      }
    }
    Map<String, Object> report = new HashMap<>();
    report.put("invalid", invalid);
    report.put("unchecked", unchecked);
    return JsonUtil.mapper().writeValueAsString(report);
  }

  /**
   * Parses what {@link #writeFiles} wrote. Anyone who can write to the control topic can send
   * such a list, so each file must name one of the table's specs and live under the table's
   * location: a forged answer cannot make the table point at files elsewhere.
   */
  public static List<ContentFile<?>> filesFromJson(Table table, String text) throws IOException {
    JsonNode array = JsonUtil.mapper().readTree(text);
    if (array == null || !array.isArray()) {
      throw new IllegalArgumentException("content files must be a JSON array");
    }
    String root = withoutScheme(table.location()) + "/";
    String dataPath = table.properties().get("write.data.path");
    String dataRoot = dataPath == null ? null : withoutScheme(dataPath) + "/";
    List<ContentFile<?>> files = new ArrayList<>();
    for (JsonNode node : array) {
      ContentFile<?> file = ContentFileParser.fromJson(node, table.specs());
      String path = withoutScheme(file.location());
      boolean inside = path.startsWith(root) || (dataRoot != null && path.startsWith(dataRoot));
      if (!inside || path.contains("/../")) {
        throw new IllegalArgumentException(
            "content file " + path + " is not under table " + table.name() + "'s location");
      }
      files.add(file);
    }
    return files;
  }

  /**
   * A location without its scheme and with one leading slash: Hadoop and Iceberg spell the same
   * place as file:/x, file:///x or /x (and s3a://b/x for s3://b/x).
   */
  private static String withoutScheme(String location) {
    String rest = location.replaceFirst("^[A-Za-z][A-Za-z0-9+.-]*:", "");
    rest = "/" + rest.replaceFirst("^/+", "");
    return rest.endsWith("/") ? rest.substring(0, rest.length() - 1) : rest;
  }

  public static long recordCount(List<ContentFile<?>> files, boolean deletes) {
    long count = 0;
    for (ContentFile<?> file : files) {
      if ((file instanceof DeleteFile) == deletes) {
        count += file.recordCount();
      }
    }
    return count;
  }
}
