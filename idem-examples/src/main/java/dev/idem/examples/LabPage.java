package dev.idem.examples;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The double-charge lab as a page on localhost, over the real lab: every run the page asks for is
 * {@link Lab#run} with the faults and guards switched on the page, the same services, database and
 * counts as the command line ({@code --faults=.. --guards=..}). Started with {@code --page}.
 *
 * <ul>
 *   <li>{@code GET /}: the page.
 *   <li>{@code GET /api/lab}: the six hops with their faults and guards, the start state and the
 *       seed's things to try, each with the scenario it sets up.
 *   <li>{@code POST /api/run?faults=<list>&guards=<list>}: one run of the lab (the command line's
 *       spelling); its counts read from the database, the faults that fired, the repeats each guard
 *       caught and the trace. A bad list is a 400 naming it. Runs go one at a time.
 * </ul>
 */
public final class LabPage implements AutoCloseable {
  /** The seed's start: the reply is lost on the way to the phone, and no guard is on. */
  static final Setup START = Setup.of("lost-reply", "none");

  /** The seed's "Things to try", each with the scenario of the command line that sets it up. */
  record Try(String text, String scenario) {}

  static final List<Try> THINGS_TO_TRY = List.of(
      new Try("Guard only the service. The key table misses a retry that carries a fresh key. Turn on \u201csame key on"
          + " every retry\u201d and the duplicate disappears.", "client-fresh-key"),
      new Try("Break the balancer and turn on \u201cNever retry a POST\u201d. The duplicate moves to the app, which gets a"
          + " 504 and retries. Refusing to retry at one layer hands the decision to another.", "balancer-504-fresh-key"),
      new Try("Break the worker, inbox on, provider key off. The crash rolled back the inbox row, but the charge had"
          + " already happened. Only the key sent downstream stops the second charge.", "worker-crash-inbox-only"),
      new Try("Break every hop, guard only the webhook. Six different events, so dedupe by event id lets each"
          + " through. Guards belong where the repeat starts.", "all-broken-webhook-only"));

  private static final ObjectMapper JSON = new ObjectMapper();

  private final HttpServer server;
  private final ExecutorService threads = Executors.newFixedThreadPool(4);

  private LabPage(HttpServer server) {
    this.server = server;
  }

  /** Starts the page on 127.0.0.1; {@code port} 0 picks a free one. */
  public static LabPage start(int port) throws IOException {
    HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 0);
    LabPage page = new LabPage(server);
    server.setExecutor(page.threads);
    server.createContext("/", page::page);
    server.createContext("/api/lab", page::lab);
    server.createContext("/api/run", page::run);
    server.start();
    return page;
  }

  /** Where the page is, e.g. {@code http://127.0.0.1:8040/}. */
  public URI uri() {
    return URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/");
  }

  @Override
  public void close() {
    server.stop(0);
    threads.shutdownNow();
  }

  private void page(HttpExchange x) throws IOException {
    if (!x.getRequestURI().getPath().equals("/")) {
      reply(x, 404, "text/plain", "not found".getBytes(StandardCharsets.UTF_8));
      return;
    }
    try (InputStream in = LabPage.class.getResourceAsStream("lab-page.html")) {
      reply(x, 200, "text/html; charset=utf-8", in.readAllBytes());
    }
  }

  private void lab(HttpExchange x) throws IOException {
    List<Map<String, Object>> hops = new ArrayList<>();
    for (Hop h : Hop.values()) {
      hops.add(Map.of("number", h.ordinal() + 1, "id", h.cliName(), "where", h.where(),
          "faultName", h.faultName(), "fault", h.fault(), "guardName", h.guardName(), "guard", h.guard()));
    }
    List<Map<String, Object>> tries = new ArrayList<>();
    for (Try t : THINGS_TO_TRY) {
      Setup s = Scenario.named(t.scenario()).orElseThrow().setup();
      tries.add(Map.of("text", t.text(), "scenario", t.scenario(), "setup", setup(s)));
    }
    json(x, 200, Map.of("hops", hops, "start", setup(START), "thingsToTry", tries));
  }

  private void run(HttpExchange x) throws IOException {
    if (!x.getRequestMethod().equals("POST")) {
      json(x, 405, Map.of("error", "POST a run: /api/run?faults=<list>&guards=<list>"));
      return;
    }
    Map<String, String> query = query(x.getRequestURI().getRawQuery());
    Setup setup;
    try {
      setup = Setup.of(query.getOrDefault("faults", "none"), query.getOrDefault("guards", "none"));
    } catch (IllegalArgumentException e) {
      json(x, 400, Map.of("error", e.getMessage()));
      return;
    }
    RunResult r;
    try {
      r = runOneAtATime(setup);
    } catch (Exception e) {
      json(x, 500, Map.of("error", "the lab run failed: " + e));
      return;
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("setup", setup(setup));
    out.put("paymentRows", r.paymentRows());
    out.put("charges", r.charges());
    out.put("receipts", r.receipts());
    Map<String, Object> hops = new LinkedHashMap<>();
    for (Hop h : Hop.values()) {
      hops.put(h.cliName(), Map.of("faultFired", r.faultsFired().getOrDefault(h, 0), "caught", r.caught(h)));
    }
    out.put("hops", hops);
    out.put("trace", r.trace());
    out.put("summary", r.summaryLine());
    json(x, 200, out);
  }

  /** One run at a time: the lab's runs each take a database and ports, and the counts are per run. */
  private synchronized RunResult runOneAtATime(Setup setup) throws Exception {
    return Lab.run("page", setup);
  }

  /** The setup as the command line spells it, and as lists of hop ids for the page's switches. */
  private static Map<String, Object> setup(Setup s) {
    return Map.of("faults", s.faults().stream().map(Hop::cliName).toList(),
        "guards", s.guards().stream().map(Hop::cliName).toList(),
        "commandLine", "--faults=" + Hop.format(s.faults(), true) + " --guards=" + Hop.format(s.guards(), false));
  }

  private static Map<String, String> query(String raw) {
    Map<String, String> out = new HashMap<>();
    if (raw != null) {
      Arrays.stream(raw.split("&")).map(p -> p.split("=", 2)).filter(p -> p.length == 2)
          .forEach(p -> out.put(URLDecoder.decode(p[0], StandardCharsets.UTF_8), URLDecoder.decode(p[1], StandardCharsets.UTF_8)));
    }
    return out;
  }

  private static void json(HttpExchange x, int status, Object body) throws IOException {
    reply(x, status, "application/json", JSON.writeValueAsBytes(body));
  }

  private static void reply(HttpExchange x, int status, String type, byte[] body) throws IOException {
    x.getResponseHeaders().set("Content-Type", type);
    x.getResponseHeaders().set("Cache-Control", "no-store");
    x.sendResponseHeaders(status, body.length);
    try (OutputStream out = x.getResponseBody()) {
      out.write(body);
    }
  }

  /** Serves the page until the process is stopped (Ctrl-C). */
  static void serve(int port) throws Exception {
    LabPage page = start(port);
    System.out.println("idem double-charge lab page: " + page.uri());
    System.out.println("(each switch runs the real lab again, as --faults/--guards would; Ctrl-C to stop)");
    Thread.currentThread().join();
  }
}
