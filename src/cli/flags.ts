import { Flags } from '@oclif/core';

export const pagingFlags = {
  limit: Flags.integer({ description: 'At most this many rows (1-10000).', default: 100 }),
  offset: Flags.integer({ description: 'Skip this many rows.', default: 0 }),
};
