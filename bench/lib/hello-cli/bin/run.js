#!/usr/bin/env node
// The bare oclif CLI that bench/startup.mjs and bench/compare.mjs measure license-server's
// start-up against: oclif's own entry point and one command that prints a line.
import { execute } from '@oclif/core';

await execute({ dir: import.meta.url });
