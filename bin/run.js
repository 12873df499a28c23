#!/usr/bin/env node
// The execute entry point alone, not the @oclif/core barrel: ~10 ms less on every start.
import { execute } from '@oclif/core/execute';

await execute({ dir: import.meta.url });
