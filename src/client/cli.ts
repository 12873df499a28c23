#!/usr/bin/env node
// The `license-server-client` command of the client package (command.ts).
import { main } from './command.js';

process.exitCode = await main(process.argv.slice(2));
