import assert from 'node:assert/strict';
import { requirePythonCryptography, runPythonJson } from '../support/python.js';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// test/clients/request-reader.py reads hw2 IDs, activation requests and .lic version 2 files,
// written from docs/client.md and docs/offline-license-format.md alone. Passing the committed
// vectors shows those documents are enough to implement the formats; each check is also shown
// to fail on a vector whose expected value was altered, so a pass is not a reader that checks nothing.

const reader = fileURLToPath(new URL('./request-reader.py', import.meta.url));
const vectorsDir = fileURLToPath(new URL('../vectors/', import.meta.url));

interface ReaderRun {
  readonly status: number | null;
  readonly checked: number;
  readonly failures: ReadonlyArray<{ readonly name: string; readonly why: string }>;
}

type Json = any; // the vector files, edited freely below

/** The files each subcommand reads next to its vector file. */
const subcommands = {
  hw2: { file: 'hardware-id-v2.json', siblings: [] as string[] },
  requests: { file: 'activation-request-v1.json', siblings: ['activation-request.txt'] },
  licenses: {
    file: 'offline-license-v2.json',
    siblings: ['request-nonce.lic', 'request-nonce-machine-key.lic', 'activation-request-v1.json', 'signing-key.pem'],
  },
} as const;
type Subcommand = keyof typeof subcommands;

function loadVectors(subcommand: Subcommand): Json {
  return JSON.parse(readFileSync(path.join(vectorsDir, subcommands[subcommand].file), 'utf8'));
}

/** How many vectors a reader must check: counted here, so a reader that skips some fails. */
function vectorCount(subcommand: Subcommand, vectors: Json): number {
  switch (subcommand) {
    case 'hw2':
      return vectors.machine_app_specific.length + vectors.trees.length;
    case 'requests':
      return 1 + vectors.accept.length + vectors.refuse.length;
    case 'licenses':
      return vectors.vectors.length + vectors.refuse.length;
  }
}

function runReader(subcommand: Subcommand, file: string): ReaderRun {
  return runPythonJson<Omit<ReaderRun, 'status'>>([reader, subcommand, file]);
}

describe('an independent reader (Python, from the docs alone) of hw2 IDs, activation requests and .lic version 2', function () {
  this.timeout(60_000);
  let directory: string;

  before(function () {
    requirePythonCryptography(this);
    directory = mkdtempSync(path.join(tmpdir(), 'request-reader-'));
  });
  after(() => directory && rmSync(directory, { recursive: true, force: true }));

  /** A copy of the vector file (and what the reader reads beside it) with one change made. */
  function alteredCopy(subcommand: Subcommand, change: (vectors: Json, dir: string) => void): string {
    const dir = mkdtempSync(path.join(directory, `${subcommand}-`));
    for (const sibling of subcommands[subcommand].siblings) {
      copyFileSync(path.join(vectorsDir, sibling), path.join(dir, sibling));
    }
    const vectors = loadVectors(subcommand);
    change(vectors, dir);
    const file = path.join(dir, subcommands[subcommand].file);
    writeFileSync(file, JSON.stringify(vectors, null, 2));
    return file;
  }

  function assertNamedFailure(subcommand: Subcommand, file: string, name: string): void {
    const run = runReader(subcommand, file);
    assert.equal(run.status, 1, `expected a failure naming ${name}`);
    assert.ok(
      run.failures.some((f) => f.name === name),
      `no failure names ${name}: ${JSON.stringify(run.failures)}`,
    );
  }

  for (const subcommand of Object.keys(subcommands) as Subcommand[]) {
    it(`${subcommand}: passes every vector of ${subcommands[subcommand].file}`, () => {
      const run = runReader(subcommand, path.join(vectorsDir, subcommands[subcommand].file));
      assert.deepEqual(run.failures, []);
      assert.equal(run.status, 0);
      assert.equal(run.checked, vectorCount(subcommand, loadVectors(subcommand)));
    });
  }

  describe('hw2: fails when an expected value is wrong', () => {
    it("a tree's hardware_id", () => {
      let name = '';
      const file = alteredCopy('hw2', (v) => {
        name = v.trees[2].name;
        v.trees[2].hardware_id = `hw2-${'0'.repeat(64)}`;
      });
      assertNamedFailure('hw2', file, name);
    });

    it("a tree's attribute lines", () => {
      let name = '';
      const file = alteredCopy('hw2', (v) => {
        name = v.trees[3].name;
        v.trees[3].attributes = v.trees[3].attributes.slice(1);
      });
      assertNamedFailure('hw2', file, name);
    });

    it('a tree that derives no ID', () => {
      let name = '';
      const file = alteredCopy('hw2', (v) => {
        name = v.trees[4].name;
        v.trees[4].hardware_id = v.trees[0].hardware_id;
      });
      assertNamedFailure('hw2', file, name);
    });

    it('an application-specific id', () => {
      let name = '';
      const file = alteredCopy('hw2', (v) => {
        name = `machine-app-specific ${v.machine_app_specific[0].machine_id}`;
        v.machine_app_specific[0].app_specific_id = '7cced899f2b24663a20be0fa96bdf12c';
      });
      assertNamedFailure('hw2', file, name);
    });
  });

  describe('requests: fails when an expected value is wrong', () => {
    it("a valid request's decoded member", () => {
      let name = '';
      const file = alteredCopy('requests', (v) => {
        name = v.accept[0].name;
        v.accept[0].request.machine_name = 'Prüfstand 4 — Halle B';
      });
      assertNamedFailure('requests', file, name);
    });

    it('the license key digest', () => {
      const file = alteredCopy('requests', (v) => {
        v.license_key_digest = 'ulmX9wksFgzBNNGyFEObWqyWBYcy6Ai2YsDHDvj933A';
      });
      assertNamedFailure('requests', file, 'request');
    });

    it('the license key as typed', () => {
      const file = alteredCopy('requests', (v) => {
        v.license_key_as_typed = ' 7kq2 m9xd 1rtv 4hjp 8wnc 3fgb 6zsz\n';
      });
      assertNamedFailure('requests', file, 'request');
    });

    it('activation-request.txt', () => {
      const file = alteredCopy('requests', (_v, dir) => {
        writeFileSync(path.join(dir, 'activation-request.txt'), '');
      });
      assertNamedFailure('requests', file, 'request');
    });

    it("a refusal's message", () => {
      let name = '';
      const file = alteredCopy('requests', (v) => {
        const vector = v.refuse.find((r: Json) => r.name === 'nonce-padded');
        name = vector.name;
        vector.message = 'activation request is malformed: "nonce" is padded';
      });
      assertNamedFailure('requests', file, name);
    });

    it('a refusal vector holding a valid request', () => {
      let name = '';
      const file = alteredCopy('requests', (v) => {
        name = v.refuse[1].name;
        v.refuse[1].text = v.text;
      });
      assertNamedFailure('requests', file, name);
    });
  });

  describe('licenses: fails when an expected value is wrong', () => {
    it("a machine-key file's decryption key", () => {
      let name = '';
      const file = alteredCopy('licenses', (v) => {
        const vector = v.vectors.find((x: Json) => x.payload.machine_key);
        name = vector.name;
        vector.decryption_key_hex = `${vector.decryption_key_hex.slice(0, -2)}00`;
      });
      assertNamedFailure('licenses', file, name);
    });

    it("a version 1 sealed key's decryption key", () => {
      let name = '';
      const file = alteredCopy('licenses', (v) => {
        const vector = v.vectors.find((x: Json) => !x.payload.machine_key);
        name = vector.name;
        vector.decryption_key_hex = '00'.repeat(32);
      });
      assertNamedFailure('licenses', file, name);
    });

    it('a payload member', () => {
      let name = '';
      const file = alteredCopy('licenses', (v) => {
        name = v.vectors[0].name;
        v.vectors[0].payload.issuer = 'licenses.example.org';
      });
      assertNamedFailure('licenses', file, name);
    });

    it('the request nonce', () => {
      let name = '';
      const file = alteredCopy('licenses', (v) => {
        name = v.vectors[1].name;
        v.vectors[1].request_nonce = 'AAECAwQFBgcICQoLDA0OAA';
      });
      assertNamedFailure('licenses', file, name);
    });

    it('the lic_file beside the vectors', () => {
      let name = '';
      const file = alteredCopy('licenses', (v, dir) => {
        name = v.vectors[0].name;
        writeFileSync(path.join(dir, v.vectors[0].lic_file), v.vectors[1].file);
      });
      assertNamedFailure('licenses', file, name);
    });

    it('a file whose signature no longer matches', () => {
      let name = '';
      const file = alteredCopy('licenses', (v) => {
        name = v.vectors[0].name;
        const json = Buffer.from(v.vectors[0].file, 'base64').toString('utf8').replace('"Seats"', '"Sitze"');
        v.vectors[0].file = `${Buffer.from(json, 'utf8').toString('base64')}\n`;
      });
      assertNamedFailure('licenses', file, name);
    });

    it("a refusal's code and message", () => {
      let name = '';
      const file = alteredCopy('licenses', (v) => {
        const vector = v.refuse.find((r: Json) => r.name === 'version-3');
        name = vector.name;
        vector.code = 'LICENSE_FILE_MALFORMED';
      });
      assertNamedFailure('licenses', file, name);
    });

    it('a refusal vector holding a valid file', () => {
      let name = '';
      const file = alteredCopy('licenses', (v) => {
        name = v.refuse[0].name;
        v.refuse[0].file = v.vectors[0].file;
      });
      assertNamedFailure('licenses', file, name);
    });
  });
});
