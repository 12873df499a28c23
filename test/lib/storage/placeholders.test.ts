import assert from 'node:assert/strict';
import { toNumberedPlaceholders } from '../../../src/lib/storage/placeholders.js';

describe('placeholder rewriting for PostgreSQL', () => {
  it('numbers ? in order, leaving quoted text and comments alone', () => {
    assert.equal(toNumberedPlaceholders('SELECT ? , ?'), 'SELECT $1 , $2');
    assert.equal(toNumberedPlaceholders(`SELECT '?', "a?b", ? -- what?\n, ?`), `SELECT '?', "a?b", $1 -- what?\n, $2`);
    assert.equal(toNumberedPlaceholders(`SELECT 'it''s ?', ?`), `SELECT 'it''s ?', $1`);
  });
});
