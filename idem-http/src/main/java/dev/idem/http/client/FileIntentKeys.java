package dev.idem.http.client;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/** {@link IntentKeys#file(Path)}: one file per intent, written so that a kill leaves none or a whole one. */
final class FileIntentKeys implements IntentKeys {
  private final Path directory;

  FileIntentKeys(Path directory) {
    if (directory == null) {
      throw new IllegalArgumentException("directory must not be null");
    }
    if (Files.exists(directory) && !Files.isDirectory(directory)) {
      throw new IllegalArgumentException("directory " + directory + " is a file, not a directory");
    }
    this.directory = directory;
  }

  @Override
  public String keyFor(String intent) throws IOException {
    Path file = fileOf(Intents.check(intent));
    String stored = read(file);
    if (stored != null) {
      return stored;
    }
    Files.createDirectories(directory);
    String minted = Intents.mint();
    Path temp = Files.createTempFile(directory, ".minting-", ".tmp");
    try {
      try (FileChannel c = FileChannel.open(temp, StandardOpenOption.WRITE)) {
        ByteBuffer bytes = ByteBuffer.wrap((minted + "\n").getBytes(StandardCharsets.UTF_8));
        while (bytes.hasRemaining()) {
          c.write(bytes);
        }
        c.force(true); // the bytes are on the disk before the name points at them
      }
      try {
        // A link fails if the name exists: of two processes minting at once, the first wins and
        // the other reads its key (a rename would replace it).
        Files.createLink(file, temp);
      } catch (FileAlreadyExistsException e) {
        return read(file);
      }
      forceDirectory(); // the new name survives a crash of the machine, not only of the process
      return minted;
    } finally {
      Files.deleteIfExists(temp);
    }
  }

  @Override
  public void release(String intent) throws IOException {
    if (Files.deleteIfExists(fileOf(Intents.check(intent)))) {
      forceDirectory();
    }
  }

  private Path fileOf(String intent) {
    try {
      byte[] hash = MessageDigest.getInstance("SHA-256").digest(intent.getBytes(StandardCharsets.UTF_8));
      return directory.resolve(HexFormat.of().formatHex(hash) + ".key");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JDK has SHA-256", e);
    }
  }

  private static String read(Path file) throws IOException {
    String text;
    try {
      text = Files.readString(file, StandardCharsets.UTF_8).strip();
    } catch (NoSuchFileException e) {
      return null;
    }
    if (text.isEmpty()) {
      throw new IOException("the key file " + file + " is empty (written by something else than IntentKeys.file):"
          + " delete it only if no request of its intent was sent");
    }
    return text;
  }

  private void forceDirectory() throws IOException {
    try (FileChannel c = FileChannel.open(directory, StandardOpenOption.READ)) {
      c.force(true);
    } catch (IOException e) {
      // Some systems (Windows) cannot open a directory; the file itself is forced already.
      if (!System.getProperty("os.name", "").startsWith("Windows")) {
        throw e;
      }
    }
  }

  @Override
  public String toString() {
    return "IntentKeys.file[" + directory + "]";
  }
}
