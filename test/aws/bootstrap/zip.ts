import { writeFileSync } from 'node:fs';
import { crc32 } from 'node:zlib';

/**
 * Writes a zip archive of text files, stored without compression: what the launcher's
 * `python3 -m zipfile -e` unpacks on the host (a CDK directory asset is a zip). Made here, in the
 * test's own process, instead of by a python3 start per archive (through a version manager's shim,
 * about 0.8 s of CPU each on the test VM). The layout is PKWARE's APPNOTE.TXT (6.3.10) section 4.3:
 * a local file header and the data per entry, then the central directory, then its end record;
 * little-endian fields, version 2.0 needed, method 0 (stored), a fixed DOS time (1 January 2025).
 */
export function writeZip(file: string, entries: Readonly<Record<string, string>>): void {
  const DOS_TIME = 0;
  const DOS_DATE = ((2025 - 1980) << 9) | (1 << 5) | 1;
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const [name, text] of Object.entries(entries)) {
    const nameBytes = Buffer.from(name, 'utf8');
    const data = Buffer.from(text, 'utf8');
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0); // local file header signature
    local.writeUInt16LE(20, 4); // version needed to extract
    local.writeUInt16LE(0, 6); // general purpose flags
    local.writeUInt16LE(0, 8); // compression method: stored
    local.writeUInt16LE(DOS_TIME, 10);
    local.writeUInt16LE(DOS_DATE, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18); // compressed size
    local.writeUInt32LE(data.length, 22); // uncompressed size
    local.writeUInt16LE(nameBytes.length, 26);
    local.writeUInt16LE(0, 28); // extra field length
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0); // central file header signature
    central.writeUInt16LE((3 << 8) | 20, 4); // version made by: UNIX, 2.0
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0, 8);
    central.writeUInt16LE(0, 10);
    central.writeUInt16LE(DOS_TIME, 12);
    central.writeUInt16LE(DOS_DATE, 14);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(nameBytes.length, 28);
    // Extra field, comment, disk number, internal attributes: none.
    central.writeUInt32LE((0o100644 << 16) >>> 0, 38); // external attributes: a regular file, rw-r--r--
    central.writeUInt32LE(offset, 42); // where the local header starts
    locals.push(local, nameBytes, data);
    centrals.push(central, nameBytes);
    offset += local.length + nameBytes.length + data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0); // end of central directory signature
  const count = Object.keys(entries).length;
  end.writeUInt16LE(count, 8); // entries on this disk
  end.writeUInt16LE(count, 10); // entries in all
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16); // where the central directory starts
  writeFileSync(file, Buffer.concat([...locals, directory, end]));
}
