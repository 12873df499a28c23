import { Command } from '@oclif/core';

export default class Hello extends Command {
  static description = 'Prints a greeting.';

  async run() {
    this.log('hello world');
  }
}
