#!/usr/bin/env -S node --import tsx --no-warnings=ExperimentalWarning
// Runs the TypeScript sources directly, without a build: for working on the tool.
import { execute } from '@oclif/core';

await execute({ development: true, dir: import.meta.url });
