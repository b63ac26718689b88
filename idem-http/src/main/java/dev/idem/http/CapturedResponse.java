package dev.idem.http;

import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.WriteListener;
import jakarta.servlet.http.Cookie;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The response of one run of a guarded handler, held in memory: status, headers, cookies and body.
 * Nothing reaches the real response while the handler runs, whatever it calls ({@code
 * flushBuffer}, {@code sendError}, {@code sendRedirect}, a flush of its writer): the answer may
 * still be rolled back, and the client must never see a response whose effect did not commit. The
 * filter sends it with {@link #sendTo} once the transaction has committed (or rolled back on
 * purpose). A run the executor repeats gets a new one, so nothing of a failed run leaks.
 *
 * <p>Headers set on the real response before the filter (by earlier filters) are read through, and
 * are overridden only by a header of the same name set here.
 */
final class CapturedResponse extends HttpServletResponseWrapper {
  private static final DateTimeFormatter HTTP_DATE = DateTimeFormatter.RFC_1123_DATE_TIME.withZone(ZoneOffset.UTC);

  private final HttpServletResponse real;
  private final Map<String, List<String>> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
  private final List<Cookie> cookies = new ArrayList<>();
  private final ByteArrayOutputStream body = new ByteArrayOutputStream();
  private int status;
  private String errorMessage;
  private boolean error;
  private String contentType;
  private String characterEncoding;
  private Locale locale;
  private ServletOutputStream stream;
  private PrintWriter writer;

  CapturedResponse(HttpServletResponse real) {
    super(real);
    this.real = real;
    this.status = real.getStatus();
  }

  // --- status -------------------------------------------------------------------------------

  @Override
  public void setStatus(int sc) {
    status = sc;
  }

  @Override
  public int getStatus() {
    return status;
  }

  @Override
  public void sendError(int sc) {
    sendError(sc, null);
  }

  @Override
  public void sendError(int sc, String msg) {
    status = sc;
    error = true;
    errorMessage = msg;
    resetBuffer();
  }

  @Override
  public void sendRedirect(String location) {
    // As the container would, except that a relative location is sent as given (Tomcat's default).
    status = SC_FOUND;
    setHeader("Location", location);
    resetBuffer();
  }

  // --- headers ------------------------------------------------------------------------------

  @Override
  public void setHeader(String name, String value) {
    if (special(name, value)) {
      return;
    }
    if (value == null) {
      headers.remove(name);
    } else {
      headers.put(name, new ArrayList<>(List.of(value)));
    }
  }

  @Override
  public void addHeader(String name, String value) {
    if (value != null && !special(name, value)) {
      headers.computeIfAbsent(name, n -> new ArrayList<>()).add(value);
    }
  }

  /** Content-Type and Content-Length are properties of the response, not plain headers. */
  private boolean special(String name, String value) {
    if ("Content-Type".equalsIgnoreCase(name)) {
      setContentType(value);
      return true;
    }
    // The length is the buffered body's, set when it is sent.
    return "Content-Length".equalsIgnoreCase(name);
  }

  @Override
  public void setIntHeader(String name, int value) {
    setHeader(name, Integer.toString(value));
  }

  @Override
  public void addIntHeader(String name, int value) {
    addHeader(name, Integer.toString(value));
  }

  @Override
  public void setDateHeader(String name, long date) {
    setHeader(name, HTTP_DATE.format(Instant.ofEpochMilli(date)));
  }

  @Override
  public void addDateHeader(String name, long date) {
    addHeader(name, HTTP_DATE.format(Instant.ofEpochMilli(date)));
  }

  @Override
  public boolean containsHeader(String name) {
    return headers.containsKey(name) || ("Content-Type".equalsIgnoreCase(name) && contentType != null)
        || real.containsHeader(name);
  }

  @Override
  public String getHeader(String name) {
    if ("Content-Type".equalsIgnoreCase(name)) {
      return getContentType();
    }
    List<String> values = headers.get(name);
    return values != null ? values.get(0) : real.getHeader(name);
  }

  @Override
  public Collection<String> getHeaders(String name) {
    List<String> values = headers.get(name);
    return values != null ? List.copyOf(values) : real.getHeaders(name);
  }

  @Override
  public Collection<String> getHeaderNames() {
    Set<String> names = new LinkedHashSet<>(real.getHeaderNames());
    names.addAll(headers.keySet());
    return names;
  }

  @Override
  public void addCookie(Cookie cookie) {
    cookies.add(cookie);
  }

  @Override
  public void setContentType(String type) {
    if (type == null) {
      contentType = null;
      return;
    }
    int at = type.toLowerCase(Locale.ROOT).indexOf("charset=");
    if (at >= 0) {
      String charset = type.substring(at + "charset=".length()).split(";", 2)[0].trim().replace("\"", "");
      if (writer == null) {
        characterEncoding = charset;
      }
      contentType = type;
    } else {
      contentType = type;
    }
  }

  @Override
  public String getContentType() {
    if (contentType == null) {
      return null;
    }
    boolean hasCharset = contentType.toLowerCase(Locale.ROOT).contains("charset=");
    return hasCharset || characterEncoding == null ? contentType : contentType + ";charset=" + characterEncoding;
  }

  @Override
  public void setCharacterEncoding(String charset) {
    if (writer == null) {
      characterEncoding = charset;
    }
  }

  @Override
  public String getCharacterEncoding() {
    return characterEncoding != null ? characterEncoding : real.getCharacterEncoding();
  }

  @Override
  public void setLocale(Locale loc) {
    locale = loc;
  }

  @Override
  public Locale getLocale() {
    return locale != null ? locale : real.getLocale();
  }

  @Override
  public void setContentLength(int len) {
    // The buffered body's length is sent instead.
  }

  @Override
  public void setContentLengthLong(long len) {
    // The buffered body's length is sent instead.
  }

  // --- body ---------------------------------------------------------------------------------

  @Override
  public ServletOutputStream getOutputStream() {
    if (writer != null) {
      throw new IllegalStateException("getWriter() was already called for this response");
    }
    if (stream == null) {
      stream = new ServletOutputStream() {
        @Override
        public void write(int b) {
          body.write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) {
          body.write(b, off, len);
        }

        @Override
        public boolean isReady() {
          return true;
        }

        @Override
        public void setWriteListener(WriteListener listener) {
          throw new IllegalStateException("non-blocking output is not supported on a route guarded by"
              + " IdempotencyKeyFilter");
        }
      };
    }
    return stream;
  }

  @Override
  public PrintWriter getWriter() {
    if (stream != null) {
      throw new IllegalStateException("getOutputStream() was already called for this response");
    }
    if (writer == null) {
      // As a container does: the writer's charset is fixed, and stated in the Content-Type.
      characterEncoding = getCharacterEncoding();
      writer = new PrintWriter(new OutputStreamWriter(body, charset()), false);
    }
    return writer;
  }

  private Charset charset() {
    return BufferedRequest.charset(getCharacterEncoding());
  }

  @Override
  public void flushBuffer() {
    flushWriter(); // into the buffer only: nothing reaches the client before the commit
  }

  @Override
  public boolean isCommitted() {
    return false;
  }

  @Override
  public void reset() {
    resetBuffer();
    headers.clear();
    cookies.clear();
    contentType = null;
    characterEncoding = null;
    locale = null;
    status = SC_OK;
    error = false;
    errorMessage = null;
  }

  @Override
  public void resetBuffer() {
    flushWriter();
    body.reset();
  }

  @Override
  public void setBufferSize(int size) {
    // Everything is buffered until the transaction commits.
  }

  private void flushWriter() {
    if (writer != null) {
      writer.flush();
    }
  }

  // --- after the run ------------------------------------------------------------------------

  /** The part of this response a repeat gets: status, the headers named in {@code replayed}, body. */
  StoredResponse stored(Collection<String> replayed) {
    flushWriter();
    List<StoredResponse.Header> kept = new ArrayList<>();
    for (String name : replayed) {
      if ("Content-Type".equalsIgnoreCase(name)) {
        if (getContentType() != null) {
          kept.add(new StoredResponse.Header("Content-Type", getContentType()));
        }
      } else {
        for (String value : getHeaders(name)) {
          kept.add(new StoredResponse.Header(name, value));
        }
      }
    }
    return new StoredResponse(status, kept, error ? new byte[0] : body.toByteArray());
  }

  /**
   * Sends everything this response holds to the real one. A {@code sendError} is passed on as
   * one, so the container makes its error page as it would have without the filter.
   */
  void sendTo(HttpServletResponse to) throws IOException {
    flushWriter();
    headers.forEach((name, values) -> {
      to.setHeader(name, values.get(0));
      values.subList(1, values.size()).forEach(v -> to.addHeader(name, v));
    });
    cookies.forEach(to::addCookie);
    if (locale != null) {
      to.setLocale(locale);
    }
    if (contentType != null) {
      to.setContentType(getContentType());
    } else if (characterEncoding != null) {
      to.setCharacterEncoding(characterEncoding);
    }
    if (error) {
      if (errorMessage == null) {
        to.sendError(status);
      } else {
        to.sendError(status, errorMessage);
      }
      return;
    }
    to.setStatus(status);
    byte[] bytes = body.toByteArray();
    to.setContentLength(bytes.length);
    if (bytes.length > 0) {
      to.getOutputStream().write(bytes);
    }
    to.flushBuffer();
  }
}
