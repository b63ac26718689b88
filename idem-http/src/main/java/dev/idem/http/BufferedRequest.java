package dev.idem.http;

import jakarta.servlet.AsyncContext;
import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.Part;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URLDecoder;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The request as the handler sees it on a guarded route: its body replayed from the buffer the
 * filter read (and fingerprinted), once per run, so a run the executor repeats reads it whole again.
 *
 * <p>Form parameters ({@code application/x-www-form-urlencoded}) are parsed here from the buffer
 * and the query string, because the container would parse them from its own stream, which the
 * filter has read. Asynchronous processing and multipart parts are refused with an {@link
 * IllegalStateException}: an async handler would answer after the transaction committed, and
 * parts would be read from the consumed stream.
 */
final class BufferedRequest extends HttpServletRequestWrapper {
  private static final String FORM = "application/x-www-form-urlencoded";

  private final byte[] body;
  private boolean streamUsed;
  private boolean readerUsed;
  private Map<String, String[]> parameters;

  BufferedRequest(HttpServletRequest request, byte[] body) {
    super(request);
    this.body = body;
  }

  /**
   * Reads at most {@code limit} bytes of {@code request}'s body; null if it has more (nothing of the
   * rest is read).
   */
  static byte[] read(HttpServletRequest request, long limit) throws IOException {
    long declared = request.getContentLengthLong();
    if (declared > limit) {
      return null;
    }
    try (InputStream in = request.getInputStream()) {
      byte[] bytes = in.readNBytes((int) Math.min(Integer.MAX_VALUE - 8, limit + 1));
      return bytes.length > limit ? null : bytes;
    }
  }

  @Override
  public ServletInputStream getInputStream() {
    if (readerUsed) {
      throw new IllegalStateException("getReader() was already called for this request");
    }
    streamUsed = true;
    ByteArrayInputStream in = new ByteArrayInputStream(body);
    return new ServletInputStream() {
      @Override
      public int read() {
        return in.read();
      }

      @Override
      public int read(byte[] b, int off, int len) {
        return in.read(b, off, len);
      }

      @Override
      public boolean isFinished() {
        return in.available() == 0;
      }

      @Override
      public boolean isReady() {
        return true;
      }

      @Override
      public void setReadListener(ReadListener listener) {
        throw asyncRefused();
      }
    };
  }

  @Override
  public BufferedReader getReader() {
    if (streamUsed) {
      throw new IllegalStateException("getInputStream() was already called for this request");
    }
    readerUsed = true;
    return new BufferedReader(new InputStreamReader(new ByteArrayInputStream(body), charset()));
  }

  @Override
  public String getParameter(String name) {
    String[] values = parameters().get(name);
    return values == null ? null : values[0];
  }

  @Override
  public Map<String, String[]> getParameterMap() {
    return parameters();
  }

  @Override
  public Enumeration<String> getParameterNames() {
    return Collections.enumeration(parameters().keySet());
  }

  @Override
  public String[] getParameterValues(String name) {
    String[] values = parameters().get(name);
    return values == null ? null : values.clone();
  }

  private Map<String, String[]> parameters() {
    if (parameters == null) {
      String type = getContentType();
      if (type == null || !type.toLowerCase(Locale.ROOT).startsWith(FORM)) {
        parameters = super.getParameterMap(); // no body parameters: the container has the query's
      } else {
        Map<String, List<String>> all = new LinkedHashMap<>();
        parse(all, getQueryString(), StandardCharsets.UTF_8);
        parse(all, new String(body, StandardCharsets.ISO_8859_1), charset());
        Map<String, String[]> map = new LinkedHashMap<>();
        all.forEach((k, v) -> map.put(k, v.toArray(String[]::new)));
        parameters = Collections.unmodifiableMap(map);
      }
    }
    return parameters;
  }

  private static void parse(Map<String, List<String>> into, String encoded, Charset charset) {
    if (encoded == null || encoded.isEmpty()) {
      return;
    }
    for (String pair : encoded.split("&")) {
      if (pair.isEmpty()) {
        continue;
      }
      int eq = pair.indexOf('=');
      // The body was read as ISO-8859-1, one char per byte, so its percent-escapes and raw bytes
      // are decoded here with the request's own charset.
      String name = decode(eq < 0 ? pair : pair.substring(0, eq), charset);
      String value = eq < 0 ? "" : decode(pair.substring(eq + 1), charset);
      into.computeIfAbsent(name, k -> new ArrayList<>()).add(value);
    }
  }

  private static String decode(String text, Charset charset) {
    String bytesAsText = new String(text.getBytes(StandardCharsets.ISO_8859_1), charset);
    try {
      return URLDecoder.decode(bytesAsText, charset);
    } catch (IllegalArgumentException e) {
      return bytesAsText; // a stray '%': kept as sent rather than failing the request
    }
  }

  private Charset charset() {
    return charset(getCharacterEncoding());
  }

  /** The charset named by a request's or response's character encoding; ISO-8859-1 (the servlet default) if none or unknown. */
  static Charset charset(String encoding) {
    try {
      return encoding == null ? StandardCharsets.ISO_8859_1 : Charset.forName(encoding);
    } catch (IllegalArgumentException e) {
      return StandardCharsets.ISO_8859_1;
    }
  }

  @Override
  public boolean isAsyncSupported() {
    return false;
  }

  @Override
  public AsyncContext startAsync() {
    throw asyncRefused();
  }

  @Override
  public AsyncContext startAsync(ServletRequest request, ServletResponse response) {
    throw asyncRefused();
  }

  @Override
  public Collection<Part> getParts() {
    throw multipartRefused();
  }

  @Override
  public Part getPart(String name) {
    throw multipartRefused();
  }

  private static IllegalStateException asyncRefused() {
    return new IllegalStateException("asynchronous processing is not supported on a route guarded by"
        + " IdempotencyKeyFilter: the response must be complete before the key's transaction commits");
  }

  private static IllegalStateException multipartRefused() {
    return new IllegalStateException("multipart parts are not supported on a route guarded by"
        + " IdempotencyKeyFilter; read the body from getInputStream()");
  }
}
