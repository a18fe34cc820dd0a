package postfach.compare;

import com.google.api.gax.core.NoCredentialsProvider;
import com.google.api.gax.core.InstantiatingExecutorProvider;
import com.google.api.gax.grpc.GrpcTransportChannel;
import com.google.api.gax.rpc.FixedTransportChannelProvider;
import com.google.api.gax.rpc.TransportChannelProvider;
import com.google.cloud.pubsub.v1.AckReplyConsumer;
import com.google.cloud.pubsub.v1.MessageReceiver;
import com.google.cloud.pubsub.v1.Publisher;
import com.google.cloud.pubsub.v1.Subscriber;
import com.google.protobuf.ByteString;
import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.PubsubMessage;
import com.google.pubsub.v1.TopicName;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.flowable.engine.HistoryService;
import org.flowable.engine.ProcessEngine;
import org.flowable.engine.ProcessEngineConfiguration;
import org.flowable.engine.RuntimeService;
import org.flowable.engine.delegate.DelegateExecution;
import org.flowable.engine.delegate.JavaDelegate;
import org.flowable.engine.runtime.Execution;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.ObjectMapper;

/**
 * The Flowable-backed receivers the article dissects, behind the same Pub/Sub
 * subscription as postfach, for benches/compare.sh.
 *
 * <ul>
 *   <li>{@code naive}: parse, correlate into Flowable, ack; ack in the catch block too
 *       (Spring Cloud GCP defaults: no lease extension, 4 callback threads).
 *   <li>{@code nack-dlt}: ack on success, nack on any exception; the subscription has a
 *       retry policy and a dead-letter topic (set up by the harness).
 *   <li>{@code inbox}: insert into an inbox table (unique message id, duplicates
 *       ignored), ack; a relay correlates rows in order per key, retries what may heal
 *       (no subscription yet, technical errors) with backoff, and parks the rest
 *       (malformed, ambiguous, late, gave up).
 * </ul>
 *
 * <p>The article's query {@code variableValueEquals("auftragId", …)} matches only local
 * variables of the execution holding the subscription and so finds nothing for a
 * process-level {@code auftragId}; these receivers use {@code processVariableValueEquals}.
 *
 * <p>Every receiver appends one line per correlation to {@code --correlations}
 * ({@code eventId, auftragId, publishMs, correlatedMs}) and one line per invoice to
 * {@code --ledger} ({@code auftragId, ms}); counters go to {@code --stats} every 200 ms.
 */
public final class Receiver {
  static final String MESSAGE = "AuftragAbgeschlossen";
  static final ObjectMapper JSON = new ObjectMapper();

  static Publisher orders;
  static FileOutputStream ledger;
  static FileOutputStream correlations;
  static FileOutputStream ackLog;
  static final AtomicLong deliveries = new AtomicLong();
  static final AtomicLong acks = new AtomicLong();
  static final AtomicLong nacks = new AtomicLong();
  static final AtomicLong correlated = new AtomicLong();
  static final AtomicLong parked = new AtomicLong();

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) {
      a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
    }
    if (a.containsKey("dump-inbox")) {
      // for the harness: every inbox row as message_id TAB status:reason
      try (Connection c =
              DriverManager.getConnection(
                  a.get("dump-inbox"), a.getOrDefault("jdbc-user", "sa"), a.getOrDefault("jdbc-password", ""));
          ResultSet r =
              c.createStatement().executeQuery("SELECT message_id, status, reason FROM inbox")) {
        while (r.next()) {
          String reason = r.getString(3);
          System.out.println(
              r.getString(1) + "\t" + r.getString(2) + (reason == null ? "" : ":" + reason));
        }
      }
      return;
    }
    String variant = a.get("variant");
    String emulator = a.get("emulator");
    String project = a.get("project");
    String twiceEvery = a.getOrDefault("start-twice", "");

    ledger = new FileOutputStream(a.get("ledger"), true);
    correlations = new FileOutputStream(a.get("correlations"), true);
    ackLog = new FileOutputStream(a.get("acks"), true);
    ManagedChannel channel = ManagedChannelBuilder.forTarget(emulator).usePlaintext().build();
    TransportChannelProvider channels =
        FixedTransportChannelProvider.create(GrpcTransportChannel.create(channel));
    orders =
        Publisher.newBuilder(TopicName.of(project, a.get("orders-topic")))
            .setChannelProvider(channels)
            .setCredentialsProvider(NoCredentialsProvider.create())
            .build();

    // the article's model, with the delegates Flowable needs for its two tasks;
    // Flowable's sendTask takes only type/operation, so the hand-over (same id,
    // same async flag) runs as a serviceTask with a Java delegate
    String xml =
        Files.readString(Path.of(a.get("bpmn")))
            .replace(
                "<sendTask id=\"auftragUebergeben\"",
                "<serviceTask id=\"auftragUebergeben\" flowable:class=\"postfach.compare.Receiver$HandOver\"")
            .replace(
                "<serviceTask id=\"rechnungStellen\"",
                "<serviceTask id=\"rechnungStellen\" flowable:class=\"postfach.compare.Receiver$Invoice\"");
    ProcessEngineConfiguration cfg =
        ProcessEngineConfiguration.createStandaloneProcessEngineConfiguration()
            .setJdbcUrl(a.get("jdbc"))
            .setJdbcUsername(a.getOrDefault("jdbc-user", "sa"))
            .setJdbcPassword(a.getOrDefault("jdbc-password", ""))
            .setDatabaseSchemaUpdate(ProcessEngineConfiguration.DB_SCHEMA_UPDATE_TRUE)
            .setAsyncExecutorActivate(true);
    ProcessEngine engine = cfg.buildProcessEngine();
    if (engine.getRepositoryService().createProcessDefinitionQuery().count() == 0) {
      engine
          .getRepositoryService()
          .createDeployment()
          .addString("auftrag-ausfuehrung.bpmn20.xml", xml)
          .deploy();
    }
    RuntimeService rs = engine.getRuntimeService();
    HistoryService hs = engine.getHistoryService();

    daemon(
        () -> {
          writeStats(a.get("stats"));
          return 200;
        });

    Inbox inbox = null;
    MessageReceiver receiver;
    switch (variant) {
      case "naive" -> receiver = (m, c) -> naive(rs, m, c);
      case "nack-dlt" -> receiver = (m, c) -> nackDlt(rs, m, c);
      case "inbox" -> {
        inbox = new Inbox(a.get("jdbc"), a.getOrDefault("jdbc-user", "sa"), a.getOrDefault("jdbc-password", ""));
        Inbox box = inbox;
        receiver = (m, c) -> box.receive(m, c);
      }
      default -> throw new IllegalArgumentException("--variant naive|nack-dlt|inbox");
    }
    // Spring Cloud GCP defaults: no ack deadline extension, 4 callback threads
    Subscriber subscriber =
        Subscriber.newBuilder(ProjectSubscriptionName.of(project, a.get("subscription")), receiver)
            .setChannelProvider(channels)
            .setCredentialsProvider(NoCredentialsProvider.create())
            .setMaxAckExtensionPeriodDuration(Duration.ZERO)
            .setParallelPullCount(1)
            .setExecutorProvider(
                InstantiatingExecutorProvider.newBuilder().setExecutorThreadCount(4).build())
            .build();
    subscriber.startAsync().awaitRunning();
    if (inbox != null) {
      inbox.startRelay(rs, hs);
    }
    System.err.println("receiver " + variant + " running");

    // the harness says what to start and when, one line per batch on stdin:
    // "start PREFIX COUNT" starts PREFIX-000000 … (the orders in --start-twice twice)
    List<String> twice = twiceEvery.isEmpty() ? List.of() : List.of(twiceEvery.split(","));
    var in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
    var pool = Executors.newFixedThreadPool(8);
    for (String line; (line = in.readLine()) != null; ) {
      String[] cmd = line.trim().split("\\s+");
      if (cmd.length != 3 || !cmd[0].equals("start")) {
        System.err.println("unknown command: " + line);
        continue;
      }
      String prefix = cmd[1];
      int count = Integer.parseInt(cmd[2]);
      List<java.util.concurrent.Future<Boolean>> batch = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        String order = String.format("%s-%06d", prefix, i);
        int starts = twice.contains(order) ? 2 : 1;
        batch.add(
            pool.submit(
                () -> {
                  for (int k = 0; k < starts; k++) {
                    if (!startOrder(rs, order)) {
                      return false;
                    }
                  }
                  return true;
                }));
      }
      int failed = 0;
      for (var f : batch) {
        failed += f.get() ? 0 : 1;
      }
      System.err.println("started " + prefix + " " + count + " orders (" + failed + " failed)");
    }
    Thread.currentThread().join();
  }

  /**
   * Starts one order; a technical failure (an H2 lock timeout under load, say)
   * is retried up to ten times, as a caller in production would.
   */
  static boolean startOrder(RuntimeService rs, String order) {
    for (int attempt = 1; ; attempt++) {
      try {
        rs.startProcessInstanceByKey("auftrag-ausfuehrung", Map.of("auftragId", order));
        return true;
      } catch (RuntimeException e) {
        System.err.println("start " + order + " attempt " + attempt + ": " + e);
        if (attempt == 10) {
          return false;
        }
        try {
          Thread.sleep(100L * attempt);
        } catch (InterruptedException i) {
          return false;
        }
      }
    }
  }

  interface Step {
    /** One round; returns how long to pause before the next. */
    long run() throws Exception;
  }

  /** Runs `step` forever on a daemon thread; a failing round pauses 500 ms. */
  static void daemon(Step step) {
    Thread t =
        new Thread(
            () -> {
              while (true) {
                long pause;
                try {
                  pause = step.run();
                } catch (InterruptedException e) {
                  return;
                } catch (Exception e) {
                  pause = 500;
                }
                try {
                  if (pause > 0) {
                    Thread.sleep(pause);
                  }
                } catch (InterruptedException e) {
                  return;
                }
              }
            });
    t.setDaemon(true);
    t.start();
  }

  static synchronized void writeStats(String path) {
    String s =
        String.format(
            "{\"deliveries\": %d, \"acks\": %d, \"nacks\": %d, \"correlated\": %d, \"parked\": %d}",
            deliveries.get(), acks.get(), nacks.get(), correlated.get(), parked.get());
    try {
      Path tmp = Path.of(path + ".tmp");
      Files.writeString(tmp, s);
      Files.move(tmp, Path.of(path), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      // next round
    }
  }

  static synchronized void append(FileOutputStream f, String line) {
    try {
      f.write((line + "\n").getBytes(StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new RuntimeException(e);
    }
  }

  /** The completion's business id: attribute eventId, else Pub/Sub's message id. */
  static String eventId(PubsubMessage m) {
    String id = m.getAttributesOrDefault("eventId", "");
    return id.isEmpty() ? m.getMessageId() : id;
  }

  static long publishMs(PubsubMessage m) {
    return m.getPublishTime().getSeconds() * 1000 + m.getPublishTime().getNanos() / 1_000_000;
  }

  static final class NoSubscription extends RuntimeException {
    NoSubscription(String key) {
      super("no waiting subscription for auftragId " + key);
    }
  }

  static final class Ambiguous extends RuntimeException {
    Ambiguous(String key, int n) {
      super(n + " waiting subscriptions for auftragId " + key);
    }
  }

  /** Correlates into the one execution waiting for the message with this key. */
  static void correlate(RuntimeService rs, String eventId, long publishMs, JsonNode payload) {
    String key = payload.path("auftragId").asString("");
    if (key.isEmpty()) {
      throw new IllegalArgumentException("payload without auftragId");
    }
    List<Execution> waiting =
        rs.createExecutionQuery()
            .messageEventSubscriptionName(MESSAGE)
            .processVariableValueEquals("auftragId", key)
            .list();
    if (waiting.isEmpty()) {
      throw new NoSubscription(key);
    }
    if (waiting.size() > 1) {
      throw new Ambiguous(key, waiting.size());
    }
    Map<String, Object> vars = new HashMap<>();
    vars.put("erledigtePositionen", payload.path("erledigtePositionen").asLong(0));
    rs.messageEventReceived(MESSAGE, waiting.get(0).getId(), vars);
    correlated.incrementAndGet();
    append(
        correlations,
        eventId + "\t" + key + "\t" + publishMs + "\t" + System.currentTimeMillis());
  }

  static void naive(RuntimeService rs, PubsubMessage m, AckReplyConsumer c) {
    deliveries.incrementAndGet();
    try {
      correlate(rs, eventId(m), publishMs(m), JSON.readTree(m.getData().toByteArray()));
      c.ack();
    } catch (Exception e) {
      c.ack(); // the article's first receiver: acked in the catch block, gone
    }
    append(ackLog, eventId(m));
    acks.incrementAndGet();
  }

  static void nackDlt(RuntimeService rs, PubsubMessage m, AckReplyConsumer c) {
    deliveries.incrementAndGet();
    try {
      correlate(rs, eventId(m), publishMs(m), JSON.readTree(m.getData().toByteArray()));
      c.ack();
      append(ackLog, eventId(m));
      acks.incrementAndGet();
    } catch (Exception e) {
      c.nack(); // redelivered with the subscription's backoff, dead-lettered after 10
      nacks.incrementAndGet();
    }
  }

  /** Variant 2 of the article: a transactional inbox in the engine's database. */
  static final class Inbox {
    final String url, user, password;

    Inbox(String url, String user, String password) throws SQLException {
      this.url = url;
      this.user = user;
      this.password = password;
      try (Connection c = connect()) {
        c.createStatement()
            .execute(
                "CREATE TABLE IF NOT EXISTS inbox ("
                    + " message_id VARCHAR(200) PRIMARY KEY,"
                    + " auftrag_id VARCHAR(200),"
                    + " payload VARCHAR(10000),"
                    + " publish_ms BIGINT,"
                    + " received_ms BIGINT,"
                    + " status VARCHAR(20),"
                    + " attempts INT,"
                    + " next_attempt_ms BIGINT,"
                    + " reason VARCHAR(200))");
      }
    }

    Connection connect() throws SQLException {
      return DriverManager.getConnection(url, user, password);
    }

    final ThreadLocal<Connection> conns = new ThreadLocal<>();

    Connection conn() throws SQLException {
      Connection c = conns.get();
      if (c == null || c.isClosed()) {
        c = connect();
        conns.set(c);
      }
      return c;
    }

    void receive(PubsubMessage m, AckReplyConsumer ack) {
      deliveries.incrementAndGet();
      String payload = m.getData().toString(StandardCharsets.UTF_8);
      String key = "";
      try {
        key = JSON.readTree(payload).path("auftragId").asString("");
      } catch (Exception e) {
        // stored anyway; the relay parks it
      }
      long now = System.currentTimeMillis();
      try {
        PreparedStatement p =
            conn().prepareStatement("INSERT INTO inbox VALUES (?,?,?,?,?,'NEW',0,?,NULL)");
        p.setString(1, eventId(m));
        p.setString(2, key);
        p.setString(3, payload);
        p.setLong(4, publishMs(m));
        p.setLong(5, now);
        p.setLong(6, now);
        try {
          p.executeUpdate();
        } catch (SQLException e) {
          if (!"23505".equals(e.getSQLState())) {
            throw e;
          } // unique message id: a duplicate, already in the inbox
        }
        ack.ack();
        append(ackLog, eventId(m));
        acks.incrementAndGet();
      } catch (SQLException e) {
        ack.nack();
        nacks.incrementAndGet();
      }
    }

    void startRelay(RuntimeService rs, HistoryService hs) {
      daemon(() -> relayOnce(rs, hs) == 0 ? 50 : 0);
    }

    /** One batch, oldest first; a key with an earlier pending row waits (per-key order). */
    int relayOnce(RuntimeService rs, HistoryService hs) throws SQLException {
      Connection c = conn();
      c.setAutoCommit(false);
      List<String[]> rows = new ArrayList<>();
      String lock = url.startsWith("jdbc:postgresql") ? " FOR UPDATE SKIP LOCKED" : " FOR UPDATE";
      try (PreparedStatement p =
          c.prepareStatement(
              "SELECT message_id, auftrag_id, payload, publish_ms, attempts FROM inbox"
                  + " WHERE status = 'NEW' AND next_attempt_ms <= ? ORDER BY received_ms LIMIT 100"
                  + lock)) {
        p.setLong(1, System.currentTimeMillis());
        try (ResultSet r = p.executeQuery()) {
          while (r.next()) {
            rows.add(
                new String[] {
                  r.getString(1), r.getString(2), r.getString(3), r.getString(4), r.getString(5)
                });
          }
        }
      }
      java.util.Set<String> blocked = new java.util.HashSet<>();
      for (String[] row : rows) {
        String id = row[0], key = row[1];
        int attempts = Integer.parseInt(row[4]);
        if (blocked.contains(key)) {
          continue; // an earlier message of this key is not through yet
        }
        String status = "DONE", reason = null;
        long next = 0;
        try {
          JsonNode payload = JSON.readTree(row[2]);
          if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("no auftragId");
          }
          correlate(rs, id, Long.parseLong(row[3]), payload);
        } catch (NoSubscription e) {
          boolean finished =
              hs.createHistoricProcessInstanceQuery()
                      .variableValueEquals("auftragId", key)
                      .finished()
                      .count()
                  > 0;
          if (finished) {
            status = "PARKED";
            reason = "late";
          } else if (attempts + 1 >= 15) {
            status = "PARKED";
            reason = "gave_up";
          } else {
            status = "NEW"; // not yet: back off, keep the key's order
            next = System.currentTimeMillis() + Math.min(30_000L, 500L << Math.min(attempts, 6));
            blocked.add(key);
          }
        } catch (Ambiguous e) {
          status = "PARKED";
          reason = "ambiguous";
        } catch (JacksonException | IllegalArgumentException e) {
          status = "PARKED";
          reason = "malformed";
        } catch (RuntimeException e) {
          status = "NEW"; // technical: retry
          next = System.currentTimeMillis() + 1000;
          blocked.add(key);
        }
        if ("PARKED".equals(status)) {
          parked.incrementAndGet();
        }
        try (PreparedStatement u =
            c.prepareStatement(
                "UPDATE inbox SET status = ?, reason = ?, attempts = attempts + 1, next_attempt_ms = ? WHERE message_id = ?")) {
          u.setString(1, status);
          u.setString(2, reason);
          u.setLong(3, next);
          u.setString(4, id);
          u.executeUpdate();
        }
      }
      c.commit();
      return rows.size();
    }
  }

  /** The send task: hands the order to the provider on the orders topic. */
  public static final class HandOver implements JavaDelegate {
    @Override
    public void execute(DelegateExecution ex) {
      String order = String.valueOf(ex.getVariable("auftragId"));
      try {
        orders
            .publish(
                PubsubMessage.newBuilder()
                    .setData(ByteString.copyFromUtf8("{\"auftragId\": \"" + order + "\"}"))
                    .putAttributes("eventId", ex.getProcessInstanceId() + ":auftragUebergeben")
                    .build())
            .get(30, TimeUnit.SECONDS);
      } catch (Exception e) {
        throw new RuntimeException("publish order " + order, e);
      }
    }
  }

  /** The invoice: no idempotency key in Flowable, so every run of the job invoices. */
  public static final class Invoice implements JavaDelegate {
    @Override
    public void execute(DelegateExecution ex) {
      append(ledger, ex.getVariable("auftragId") + "\t" + System.currentTimeMillis());
    }
  }
}
