import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { PYTHON } from '../support/python.js';

/**
 * The independent readers must read with one known library on every run: Node 20's run once
 * found Debian's python3 first on PATH (cryptography 38), Node 24's a pyenv one (48). CI pins
 * Debian's, whose cryptography comes with the distribution's packages.
 */
describe('the Python of the independent readers', () => {
  it('is the one .ci/run pins under CI=true: Debian\'s python3 with Debian\'s cryptography', function () {
    if (process.env.CI !== 'true') this.skip();
    assert.ok(path.isAbsolute(PYTHON), `LICENSE_TEST_PYTHON names one Python by its path (it is ${JSON.stringify(PYTHON)})`);
    const owner = spawnSync('dpkg', ['-S', realpathSync(PYTHON)], { encoding: 'utf8' });
    assert.equal(owner.status, 0, `${PYTHON} comes from a Debian package: ${owner.stderr}`);
    const library = spawnSync(PYTHON, ['-c', 'import cryptography; print(cryptography.__file__, cryptography.__version__)'], { encoding: 'utf8' });
    assert.equal(library.status, 0, library.stderr);
    const [file, version] = library.stdout.trim().split(' ');
    assert.equal(spawnSync('dpkg', ['-S', file!]).status, 0, `cryptography ${version} at ${file} comes from a Debian package`);
    console.log(`      ${PYTHON} (${owner.stdout.split(':')[0]}), cryptography ${version}`);
  });
});
