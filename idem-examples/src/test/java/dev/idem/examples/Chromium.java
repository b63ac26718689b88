package dev.idem.examples;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.WebSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A real headless Chromium, driven over the Chrome DevTools Protocol on its websocket with the
 * JDK's {@link WebSocket}: {@link #evaluate} runs JavaScript in the page, {@link #click} sends real
 * mouse events to the middle of an element (so a hidden or covered switch cannot be clicked).
 */
final class Chromium implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern LISTENING = Pattern.compile("DevTools listening on (ws://[^\\s]+)");
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  private final Process process;
  private final Path profile;
  private final WebSocket socket;
  private final AtomicInteger ids = new AtomicInteger();
  private final Map<Integer, CompletableFuture<JsonNode>> pending = new ConcurrentHashMap<>();

  private Chromium(Process process, Path profile, WebSocket socket) {
    this.process = process;
    this.profile = profile;
    this.socket = socket;
  }

  /** The Chromium on the PATH ({@code chromium}, as Debian's package installs it), if any. */
  static Optional<Path> find() {
    String path = System.getenv().getOrDefault("PATH", "");
    return Stream.of("chromium", "chromium-browser", "google-chrome")
        .flatMap(name -> Stream.of(path.split(java.io.File.pathSeparator)).map(dir -> Path.of(dir, name)))
        .filter(Files::isExecutable)
        .findFirst();
  }

  /** Starts Chromium headless on {@code url} and connects to that page's DevTools websocket. */
  static Chromium open(Path executable, URI url) throws Exception {
    Path profile = Files.createTempDirectory("idem-chromium");
    Process process = new ProcessBuilder(executable.toString(), "--headless=new", "--no-sandbox", "--disable-gpu",
        "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
        "--user-data-dir=" + profile, url.toString())
        .redirectErrorStream(true)
        .start();
    try {
      URI browser = URI.create(listening(process));
      HttpClient http = HttpClient.newBuilder().connectTimeout(TIMEOUT).build();
      URI list = URI.create("http://" + browser.getHost() + ":" + browser.getPort() + "/json/list");
      String pageSocket = null;
      long deadline = System.nanoTime() + TIMEOUT.toNanos();
      while (pageSocket == null && System.nanoTime() < deadline) {
        JsonNode targets = JSON.readTree(http.send(HttpRequest.newBuilder(list).build(),
            HttpResponse.BodyHandlers.ofString()).body());
        for (JsonNode t : targets) {
          if (t.path("type").asText().equals("page") && t.path("url").asText().startsWith(url.toString())) {
            pageSocket = t.path("webSocketDebuggerUrl").asText();
          }
        }
        if (pageSocket == null) {
          Thread.sleep(100);
        }
      }
      if (pageSocket == null) {
        throw new IllegalStateException("Chromium opened no page at " + url);
      }
      Chromium[] self = new Chromium[1];
      WebSocket socket = http.newWebSocketBuilder().buildAsync(URI.create(pageSocket), new WebSocket.Listener() {
        private final StringBuilder text = new StringBuilder();

        @Override
        public CompletionStage<?> onText(WebSocket ws, CharSequence data, boolean last) {
          text.append(data);
          if (last) {
            self[0].received(text.toString());
            text.setLength(0);
          }
          ws.request(1);
          return null;
        }
      }).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      self[0] = new Chromium(process, profile, socket);
      return self[0];
    } catch (Exception e) {
      process.destroyForcibly();
      throw e;
    }
  }

  /** Reads Chromium's output until it says where DevTools listens. */
  private static String listening(Process process) throws Exception {
    CompletableFuture<String> found = new CompletableFuture<>();
    StringBuilder output = new StringBuilder();
    Thread reader = new Thread(() -> {
      try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
        for (String line; (line = in.readLine()) != null; ) {
          synchronized (output) {
            output.append(line).append('\n');
          }
          Matcher m = LISTENING.matcher(line);
          if (m.find()) {
            found.complete(m.group(1));
          }
        }
      } catch (IOException e) {
        found.completeExceptionally(e);
      }
      found.completeExceptionally(new IllegalStateException("Chromium exited without a DevTools address"));
    }, "chromium-output");
    reader.setDaemon(true);
    reader.start();
    try {
      return found.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
    } catch (Exception e) {
      synchronized (output) {
        throw new IllegalStateException("Chromium did not start its DevTools; it printed:\n" + output, e);
      }
    }
  }

  private void received(String message) {
    try {
      JsonNode m = JSON.readTree(message);
      if (m.has("id")) {
        CompletableFuture<JsonNode> f = pending.remove(m.get("id").asInt());
        if (f != null) {
          f.complete(m);
        }
      }
    } catch (IOException e) {
      pending.values().forEach(f -> f.completeExceptionally(e));
    }
  }

  /** Sends one DevTools command and waits for its answer. */
  JsonNode call(String method, ObjectNode params) throws Exception {
    int id = ids.incrementAndGet();
    CompletableFuture<JsonNode> answer = new CompletableFuture<>();
    pending.put(id, answer);
    ObjectNode command = JSON.createObjectNode().put("id", id).put("method", method);
    command.set("params", params);
    socket.sendText(JSON.writeValueAsString(command), true).get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
    JsonNode reply = answer.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS);
    if (reply.has("error")) {
      throw new IllegalStateException(method + " failed: " + reply.get("error"));
    }
    return reply.get("result");
  }

  /** The value of a JavaScript expression in the page (a promise is awaited). */
  JsonNode evaluate(String expression) throws Exception {
    JsonNode result = call("Runtime.evaluate", JSON.createObjectNode()
        .put("expression", expression).put("returnByValue", true).put("awaitPromise", true));
    if (result.has("exceptionDetails")) {
      throw new IllegalStateException("the page threw on " + expression + ": " + result.get("exceptionDetails"));
    }
    return result.path("result").path("value");
  }

  /** A real mouse click (pressed and released) in the middle of the element {@code selector} finds. */
  void click(String selector) throws Exception {
    JsonNode box = evaluate("(() => { const e = document.querySelector(" + JSON.writeValueAsString(selector) + ");"
        + " if (!e) return null; e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
        + " return {x: r.x + r.width / 2, y: r.y + r.height / 2}; })()");
    if (box.isNull() || box.isMissingNode()) {
      throw new IllegalStateException("no element " + selector + " on the page");
    }
    for (String type : new String[] {"mousePressed", "mouseReleased"}) {
      call("Input.dispatchMouseEvent", JSON.createObjectNode().put("type", type)
          .put("x", box.get("x").asDouble()).put("y", box.get("y").asDouble())
          .put("button", "left").put("clickCount", 1));
    }
  }

  @Override
  public void close() throws Exception {
    try {
      socket.abort();
    } finally {
      // Chromium's own helper processes (renderer, GPU, zygote) first, then the browser.
      process.descendants().forEach(ProcessHandle::destroy);
      process.destroy();
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      }
      try (Stream<Path> files = Files.walk(profile)) {
        files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }
}
